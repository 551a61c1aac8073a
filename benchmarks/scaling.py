"""Cost curves (issue 44 §4): how a run's time and peak memory grow.

RL: seconds per agent-episode and peak memory of one run against its agents per run (2 … 256) for
each method, against FRD's grid S (5 … 50 on CartPole's 4 dimensions) and against the hidden
width h (16 … 256).

    python -m benchmarks.scaling rl [--axes agents grid hidden] [--episodes 15] [--period 5]
                                    [--csv benchmarks/results/scaling_rl.csv --variant NAME]

Each point is one run (seed 0) in a fresh process, so that its peak resident memory (``VmHWM``) is
its own. Every agent plays exactly ``--episodes`` episodes (target inf, until all: no mission, so the
same work at every point, not a learning curve) with a round every ``--period`` episodes. The child
loads the numba kernels before its clock starts and reports the run's process CPU seconds (fair
while other jobs share the machine) and wall seconds, its env steps, the resident memory before the
run (interpreter, torch, kernels) and the peak. Seconds per agent-episode = CPU seconds ÷ (agents ×
episodes); µs per env step is also reported, since an episode's length changes with the policy.

Classification: seconds per round and peak memory of one run against its total devices (10, 100,
1,000) at a fixed number of participants per round, and against the participants per round (10,
50, 200) at a fixed total, for FL, FD, Mix2FLD and FedDualMatch; the ``dirichlet`` axis is issue
44 §2's 1,000-device command (20 per round, Dirichlet α = 0.3) beside the same at 100 devices.

    python -m benchmarks.scaling cls [--axes devices participants dirichlet] [--methods fl fd …]
                                     [--dataset mnist] [--samples-per-device 8] [--rounds 3]
                                     [--iterations 10] [--csv benchmarks/results/scaling_cls.csv]

Each point is again one run (seed 0, one torch thread as ``frd cls``'s default) in a fresh
process, after a one-round warm-up run of the same method on 2 devices (kernels, first calls).
Round 1 also carries the run's setup (partition, every device's model, the method's round-0
exchange), so the seconds per round are those of rounds 2 … ``--rounds`` (process CPU and wall),
round 1 with the setup is reported apart, and a round's wall seconds are split as rounds.csv
splits them: local training, the exchange's server work, and the rest (evaluating the models).
MNIST, since 1,000 devices × 8 samples need its 8,000-image pool (digits has 1,437). ``--csv``
appends the table to a tidy CSV (``benchmarks.tidy``).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import pandas as pd

from benchmarks.tidy import record

T = TypeVar("T")

METHODS = ("independent", "frl", "pd", "frd")
AGENTS = (2, 8, 32, 128, 256)
GRIDS = (5, 10, 20, 30, 50)
WIDTHS = (16, 32, 64, 128, 256)
AXIS_AGENTS = 8
"""Agents per run on the S and h axes [our choice: the seed study's largest count]."""

CLS_METHODS = ("fl", "fd", "mix2fld", "feddualmatch")
DEVICES = (10, 100, 1000)
PARTICIPANTS = (10, 50, 200)
AXIS_PARTICIPANTS = 10
"""Participants per round on the devices axis [our choice: FedAvg's C = 0.1 at 100 devices]."""
AXIS_DEVICES = 1000
"""Total devices on the participants axis."""
DIRICHLET_DEVICES = (100, 1000)
DIRICHLET_METHODS = ("fl", "fd", "mix2fld")
DIRICHLET = dict(clients_per_round=20, partition="dirichlet", alpha=0.3)
"""Issue 44 §2's command (its minimum per device the default: 1, below 10 samples per device)."""


def _status_kib(field: str) -> int:
    """A ``/proc/self/status`` memory line (``VmRSS``, ``VmHWM``) in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measured(work: Callable[[], T]) -> tuple[T, dict]:
    """``work()``'s result, and its process CPU and wall seconds, the resident memory before it and
    the peak during it (MiB; the peak so far, a warm-up's, is forgotten first)."""
    rss_before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    wall, cpu = time.perf_counter(), time.process_time()
    out = work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return out, dict(cpu_s=cpu, wall_s=wall, rss_before_mib=rss_before / 1024, peak_rss_mib=_status_kib("VmHWM") / 1024)


def one_point(method: str, agents: int, grid: int, hidden: int, episodes: int, period: int) -> dict:
    """Run one RL point in this process (the child's side): its timings, steps and memory."""
    import numpy as np

    from frd.agents import kernel
    from frd.rl.config import rl_config
    from frd.rl.runner import iter_simulate

    kernel.warm_up()
    options = {"grid": grid} if method in ("frd", "mixfrd") else {}

    def config(n: int, cap: int):
        return rl_config(method, agents=n, hidden=hidden, max_episodes=cap, period=period, target=float("inf"),
                         until="all", **options)
    list(iter_simulate(config(2, 2 * period), [(method, 1)]))  # the fused period, a round and the rule loaded
    tables, cost = _measured(lambda: list(iter_simulate(config(agents, episodes), [(method, 0)]))[0])
    cpu = cost["cpu_s"]
    runs = tables["runs"].iloc[0]
    assert (tables["episodes"].groupby("agent").size() == episodes).all(), "every agent plays every episode"
    return dict(method=method, agents=agents, grid=grid if options else np.nan, hidden=hidden, episodes=episodes,
                period=period, rounds=int(runs["rounds"]), env_steps=int(runs["mission_env_steps"]),
                bits_up=int(runs["bits_up"]), cpu_s=cpu, wall_s=cost["wall_s"],
                s_per_agent_episode=cpu / (agents * episodes), us_per_env_step=cpu / runs["mission_env_steps"] * 1e6,
                rss_before_mib=cost["rss_before_mib"], peak_rss_mib=cost["peak_rss_mib"])


def one_cls_point(method: str, devices: int, clients_per_round: int, rounds: int, iterations: int, dataset: str,
                  samples: int, partition: str = "shards", alpha: float = 0.5, min_samples: int | None = None,
                  data_dir: str | None = None, **options: Any) -> dict:
    """Run one classification point in this process (the child's side): its timings per round and
    memory. ``options``: method options, each passed only to the methods that have it."""
    import torch

    from frd.classification.data import load_dataset
    from frd.classification.methods import study_config
    from frd.classification.runner import run_seed

    if rounds < 2:
        raise ValueError("rounds must be at least 2: round 1 carries the setup, the later ones are timed per round")
    data = load_dataset(dataset, data_dir)

    def config(n: int, k: int | None, r: int, i: int):
        return study_config(method, dataset=dataset, data_dir=data_dir, devices=n, clients_per_round=k, rounds=r,
                            iterations_per_round=i, samples_per_device=samples, partition=partition, alpha=alpha,
                            min_samples=min_samples, seeds=1, **options)
    torch.set_num_threads(config(2, None, 1, 1).threads)  # frd cls's (1): more oversubscribe shared cores
    run_seed(config(2, None, 1, 1), 1, data)  # kernels and first calls loaded
    clocks: list[tuple[float, float, int]] = []  # (CPU, wall, peak KiB) at the start and at the end of every round

    def run() -> dict:
        tick = lambda: clocks.append((time.process_time(), time.perf_counter(), _status_kib("VmHWM")))  # noqa: E731
        tick()
        return run_seed(config(devices, clients_per_round, rounds, iterations), 0, data, on_round=tick)
    tables, cost = _measured(run)
    runs = tables["runs"].iloc[0]
    later = tables["rounds"][tables["rounds"]["round"] >= 2].drop_duplicates(["round", "phase"])
    phase_wall = later.groupby("phase")["compute_s"].sum() / (rounds - 1)  # the rest of a round: evaluation
    (cpu_start, _, _), (cpu_first, wall_first, _), (cpu_last, wall_last, rounds_peak) = clocks[0], clocks[1], clocks[-1]
    return dict(method=method, dataset=dataset, partition=partition, devices=devices,
                participants=min(clients_per_round, devices), samples=int(runs["samples"]), rounds=rounds,
                iterations=iterations, parameters=int(runs["parameters"]), bits_up=int(runs["bits_up"]),
                cpu_s=cost["cpu_s"], wall_s=cost["wall_s"], first_round_cpu_s=cpu_first - cpu_start,
                cpu_s_per_round=(cpu_last - cpu_first) / (rounds - 1),
                wall_s_per_round=(wall_last - wall_first) / (rounds - 1), train_wall_s_per_round=phase_wall["local"],
                exchange_wall_s_per_round=phase_wall["exchanged"],
                rss_before_mib=cost["rss_before_mib"], rounds_peak_rss_mib=rounds_peak / 1024,
                peak_rss_mib=cost["peak_rss_mib"])


def points(axes: list[str]) -> list[dict]:
    """The (method, agents, grid, hidden) of every RL point on ``axes``."""
    out = []
    if "agents" in axes:
        out += [dict(method=m, agents=n, grid=30, hidden=64) for m in METHODS for n in AGENTS]
    if "grid" in axes:
        out += [dict(method="frd", agents=AXIS_AGENTS, grid=s, hidden=64) for s in GRIDS]
    if "hidden" in axes:
        out += [dict(method=m, agents=AXIS_AGENTS, grid=30, hidden=h) for m in METHODS for h in WIDTHS]
    return out


def cls_points(axes: list[str], methods: list[str], devices: list[int], participants: list[int],
               fixed_participants: int, fixed_devices: int) -> list[dict]:
    """The (method, devices, clients per round, partition …) of every classification point on ``axes``."""
    out = []
    if "devices" in axes:
        out += [dict(method=m, devices=n, clients_per_round=fixed_participants) for m in methods for n in devices]
    if "participants" in axes:
        out += [dict(method=m, devices=fixed_devices, clients_per_round=k) for m in methods for k in participants]
    if "dirichlet" in axes:
        out += [dict(method=m, devices=n, **DIRICHLET) for m in methods if m in DIRICHLET_METHODS
                for n in DIRICHLET_DEVICES]
    return out


def in_child(args: list[str]) -> dict:
    """``python -m benchmarks.scaling ARGS`` in a fresh process: the JSON of its last line."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.scaling", *args], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def flags(values: dict) -> list[str]:
    """``{"a_b": 1}`` as ``["--a-b", "1"]``, leaving out values that are None."""
    return [s for k, v in values.items() if v is not None for s in (f"--{k.replace('_', '-')}", str(v))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    rl = sub.add_parser("rl", help="the RL cost curves")
    rl.add_argument("--axes", nargs="+", choices=("agents", "grid", "hidden"), default=["agents", "grid", "hidden"])
    rl.add_argument("--episodes", type=int, default=15, help="episodes per agent at every point")
    rl.add_argument("--period", type=int, default=5, help="episodes between rounds")
    cls = sub.add_parser("cls", help="the classification cost curves")
    cls.add_argument("--axes", nargs="+", choices=("devices", "participants", "dirichlet"),
                     default=["devices", "participants", "dirichlet"])
    cls.add_argument("--methods", nargs="+", choices=CLS_METHODS, default=list(CLS_METHODS))
    cls.add_argument("--devices", nargs="+", type=int, default=list(DEVICES), help="total devices on the devices axis")
    cls.add_argument("--participants", nargs="+", type=int, default=list(PARTICIPANTS),
                     help="participants per round on the participants axis")
    cls.add_argument("--fixed-participants", type=int, default=AXIS_PARTICIPANTS,
                     help="participants per round on the devices axis")
    cls.add_argument("--fixed-devices", type=int, default=AXIS_DEVICES, help="total devices on the participants axis")
    cls.add_argument("--dataset", default="mnist")
    cls.add_argument("--data-dir", help="dataset files (default frd's: ../shared/data/<dataset> beside the repo)")
    cls.add_argument("--samples-per-device", type=int, default=8, help="8: 1,000 devices use MNIST's 8,000-image pool")
    cls.add_argument("--partition", default="shards",
                     help="on the devices and participants axes: shards (McMahan et al. 2017's, 8 samples in 2 shards "
                          "on every device; iid needs a sample of every label per device, more than MNIST's pool at "
                          "1,000 devices)")
    cls.add_argument("--rounds", type=int, default=3, help="rounds per run (round 1 carries the setup), at least 2")
    cls.add_argument("--iterations", type=int, default=10, help="local iterations per round")
    cls.add_argument("--distill-iterations", type=int, default=3,
                     help="FedDualMatch's image updates per participant and round (its cpu preset's 30 would take "
                          "minutes per round at 200 participants)")
    cls.add_argument("--server-epochs", type=int, default=5, help="FedDualMatch's server epochs (cpu preset 50)")
    for part in (rl, cls):
        part.add_argument("--csv", help=f"also append the table to this tidy CSV, e.g. "
                                        f"benchmarks/results/scaling_{part.prog.split()[-1]}.csv")
        part.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    point = sub.add_parser("rl-point", help="one RL point in this process (what rl runs in each child)")
    point.add_argument("--method", required=True)
    for name in ("agents", "grid", "hidden", "episodes", "period"):
        point.add_argument(f"--{name}", type=int, required=True)
    cls_point = sub.add_parser("cls-point", help="one classification point in this process (what cls runs in each child)")
    cls_point.add_argument("--method", required=True)
    for name in ("devices", "clients-per-round", "rounds", "iterations", "samples", "min-samples"):
        cls_point.add_argument(f"--{name}", type=int, required=name != "min-samples")
    cls_point.add_argument("--dataset", required=True)
    cls_point.add_argument("--partition", default="shards")
    cls_point.add_argument("--alpha", type=float, default=0.5)
    cls_point.add_argument("--data-dir")
    cls_point.add_argument("--distill-iterations", type=int)
    cls_point.add_argument("--server-epochs", type=int)
    args = parser.parse_args()
    if args.part == "rl-point":
        print(json.dumps(one_point(args.method, args.agents, args.grid, args.hidden, args.episodes, args.period)))
        return
    if args.part == "cls-point":
        print(json.dumps(one_cls_point(args.method, args.devices, args.clients_per_round, args.rounds, args.iterations,
                                       args.dataset, args.samples, args.partition, args.alpha, args.min_samples,
                                       args.data_dir, distill_iterations=args.distill_iterations,
                                       server_epochs=args.server_epochs)))
        return
    rows = []
    if args.part == "rl":
        for p in points(args.axes):
            rows.append(in_child(["rl-point", *flags(p), *flags(dict(episodes=args.episodes, period=args.period))]))
            r = rows[-1]
            print(f"{r['method']:>11} agents {r['agents']:>3} S {p['grid']:>2} h {r['hidden']:>3}: "
                  f"{r['s_per_agent_episode'] * 1e3:8.2f} ms/agent-episode, {r['us_per_env_step']:6.1f} µs/step, "
                  f"peak {r['peak_rss_mib']:7.1f} MiB (before {r['rss_before_mib']:.0f})", flush=True)
    else:
        fixed = dict(rounds=args.rounds, iterations=args.iterations, dataset=args.dataset,
                     samples=args.samples_per_device, data_dir=args.data_dir, partition=args.partition,
                     distill_iterations=args.distill_iterations, server_epochs=args.server_epochs)
        for p in cls_points(args.axes, args.methods, args.devices, args.participants, args.fixed_participants,
                            args.fixed_devices):
            rows.append(in_child(["cls-point", *flags({**fixed, **p})]))
            r = rows[-1]
            print(f"{r['method']:>12} {r['partition']:>9} devices {r['devices']:>4} per round {r['participants']:>3}: "
                  f"{r['cpu_s_per_round']:7.2f} CPU s/round ({r['wall_s_per_round']:.2f} wall), first "
                  f"{r['first_round_cpu_s']:6.2f}, peak {r['peak_rss_mib']:7.1f} MiB "
                  f"(before {r['rss_before_mib']:.0f})", flush=True)
    if args.csv:
        record(pd.DataFrame(rows), args.csv, args.variant)


if __name__ == "__main__":
    main()
