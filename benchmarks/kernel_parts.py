"""Where an A2C update's time goes: each part of ``frd.agents.kernel.learn_lane`` timed alone.

    python -m benchmarks.kernel_parts [--lanes 64 256] [--repeats 100]

A CartPole batch of independent lanes (h = 64, n = 8) is stepped for 100 update periods, then
each part of the update runs ``--repeats`` times over every lane, in numba loops with the
kernels' own functions and the batch's weights and rollout (data in cache, as in the fused
period): the critic's nine forwards (the rollout's states and the state after it), the actor's
and the critic's backward over the rollout, each network's Adam step; then the whole update
(``kernel.learn``, acting's cached activations reused) and acting (``kernel.act``). CPU µs per lane and update, per lane-step for
acting. What a faster arithmetic would have to cut (issue 13, part 2).

``--blocking``: instead, whether keeping a lane's data in cache pays: acting on the rollout's 8
states and the update, 8 such periods of one lane before the next lane, against one period per
lane per pass (the same work), four repeats each, CPU µs per lane-period.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from frd.agents import kernel
from frd.jit import JIT, compiled
from frd.rl.config import RLConfig
from frd.rl.runner import RLBatch


@compiled(**JIT)
def _critic_forwards(pc, obs, d, h, repeats):
    h1, h2, values = np.empty((9, h), np.float32), np.empty((9, h), np.float32), np.empty((9, 1), np.float32)
    states = np.empty((9, d), np.float32)
    for _ in range(repeats):
        for lane in range(pc.shape[0]):
            for t in range(9):
                states[t] = obs[lane, t % 8]
            kernel._forward_rows(pc[lane], d, h, 1, states, h1, h2, values, False)


@compiled(**JIT)
def _backwards(p, obs, h1, h2, d, h, o, repeats):
    grad, dout = np.zeros(p.shape[1], np.float32), np.full((8, o), 0.01, np.float32)
    dh1, dh2 = np.empty((8, h), np.float32), np.empty((8, h), np.float32)
    for _ in range(repeats):
        for lane in range(p.shape[0]):
            kernel._backward(p[lane], grad, d, h, o, obs[lane], h1[lane], h2[lane], dout, dh1, dh2, False)


@compiled(**JIT)
def _adams(p, m, v, repeats):
    grad = np.full(p.shape[1], 1e-3, np.float32)
    for _ in range(repeats):
        for lane in range(p.shape[0]):
            kernel._adam(p[lane], grad, np.float32(1.0), m[lane], v[lane], 10.0, 7e-4, 0.9, 0.999, 1e-8)


@compiled(**JIT)
def _periods(per_lane, passes, dims, nets, adam, rollout, cache, hyper, actions_out, probs_out):
    """``passes`` × every lane × ``per_lane`` periods of acting on the rollout's states and updating."""
    obs = rollout.obs
    T, no_grads = obs.shape[1], np.zeros((0, 0), np.float32)
    states = np.ascontiguousarray(obs.transpose(1, 0, 2))  # [step, lane, d]: acting takes C-ordered rows
    scratch = kernel.learn_scratch(T, dims.d, dims.h, dims.o, nets.actor.shape[1], nets.critic.shape[1])
    for _ in range(passes):
        for lane in range(obs.shape[0]):
            for _ in range(per_lane):
                for t in range(T):
                    kernel.act_lane(lane, nets.actor, states[t], np.float32(0.5), t, dims, cache, actions_out,
                                    probs_out, True)
                kernel.learn_lane(lane, T, dims, nets, adam, rollout, cache, hyper, no_grads, no_grads, scratch)


def _stepped_group(lanes: int):
    """The learner group of a CartPole batch of independent lanes after 100 steps."""
    config = RLConfig(agents=2, seeds=lanes // 2, max_episodes=10**9, target=float("inf"), threads=1)
    batch = RLBatch(config, [("independent", seed) for seed in range(lanes // 2)])
    batch.reset()
    for _ in range(100):
        batch.step()
    (group,) = batch.pop.groups
    return batch, group


def _copies(group) -> tuple[kernel.Nets, kernel.Adam]:
    """Copies of the group's weights and Adam state, so that the batch stays as it was."""
    return (kernel.Nets(*(a.copy() for a in group.nets)), kernel.Adam(*(a.copy() for a in group.adam)))


def blocking(lanes: int, block: int = 8) -> dict[int, list[float]]:
    """CPU µs per lane-period, four repeats, with 1 and ``block`` periods per lane before the next."""
    _, group = _stepped_group(lanes)
    nets, adam = _copies(group)
    actions, probs = np.zeros(lanes, np.int64), np.zeros((lanes, group.dims.o), np.float32)
    rollout = group.rollout.arrays._replace(obs=np.ascontiguousarray(group.rollout.obs))
    hyper = group.hyper

    def run(per_lane: int, passes: int) -> float:
        start = time.process_time()
        _periods(per_lane, passes, group.dims, nets, adam, rollout, group.cache, hyper, actions, probs)
        return (time.process_time() - start) / (per_lane * passes * lanes) * 1e6

    run(1, 1)  # compile or load
    times: dict[int, list[float]] = {1: [], block: []}
    for _ in range(4):
        for per_lane in times:
            times[per_lane].append(run(per_lane, 64 // per_lane))
    return times


def parts(lanes: int, repeats: int) -> dict[str, float]:
    """CPU µs per lane of each part (acting: per lane-step)."""
    batch, group = _stepped_group(lanes)
    r, cache, (d, h, o, _) = group.rollout, group.cache, group.dims
    nets, adam = _copies(group)
    pa, pc, ma, va, mc, vc = nets.actor, nets.critic, adam.actor_m, adam.actor_v, adam.critic_m, adam.critic_v
    hyper = group.hyper
    no_grads = np.zeros((0, 0), np.float32)

    def learn(n: int) -> None:
        for _ in range(n):
            cache.ok[:] = True  # acting's activations reused, as in a real period (same states)
            kernel.learn(8, group.dims, nets, adam, r.arrays, cache, hyper, no_grads, no_grads)

    def act(n: int) -> None:
        obs, uniforms = np.ascontiguousarray(batch.obs, dtype=np.float32), np.full(lanes, 0.5)
        actions, probs, active = np.zeros(lanes, np.int64), np.zeros((lanes, o), np.float32), np.ones(lanes, bool)
        for _ in range(n):
            for t in range(8):
                kernel.act(pa, obs, uniforms, t, group.dims, cache, actions, probs, active)

    timed = {
        "critic forwards ×9": lambda n: _critic_forwards(pc, r.obs, d, h, n),
        "actor backward": lambda n: _backwards(pa, r.obs, cache.h1, cache.h2, d, h, o, n),
        "critic backward": lambda n: _backwards(pc, r.obs, cache.h1, cache.h2, d, h, 1, n),
        "Adam, actor": lambda n: _adams(pa, ma, va, n),
        "Adam, critic": lambda n: _adams(pc, mc, vc, n),
        "whole update": learn,
        "acting, per lane-step": act,
    }
    out = {}
    for name, run in timed.items():
        run(1)  # compile or load
        start = time.process_time()
        run(repeats)
        per = (time.process_time() - start) / (repeats * lanes) * 1e6
        out[name] = per / 8 if name.startswith("acting") else per
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lanes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--blocking", action="store_true", help="time 8 periods per lane before the next instead")
    args = parser.parse_args()
    for lanes in args.lanes:
        if args.blocking:
            times = blocking(lanes)
            print(f"{lanes} lanes, CPU µs per lane-period: "
                  + " | ".join(f"{k} per lane " + " ".join(f"{t:.1f}" for t in v) for k, v in times.items()), flush=True)
            continue
        print(f"{lanes} lanes, CPU µs per lane and update: "
              + ", ".join(f"{k} {v:.2f}" for k, v in parts(lanes, args.repeats).items()), flush=True)


if __name__ == "__main__":
    main()
