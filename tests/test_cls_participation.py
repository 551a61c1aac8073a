"""Partial participation in classification (issue 44): seeded sampling, only the sampled devices
train, upload and download, non-participants untouched bit for bit, FedAvg over the participants,
the ledger, channel outages, and bad input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frd.classification.context import RunContext
from frd.classification.experiment import run_experiment
from frd.classification.methods import CLS_METHODS, cls_config, cls_configs
from frd.classification.methods.fl import FedAvg
from frd.classification.participation import sampled_devices
from frd.classification.runner import run_seed
from frd.cli import main
from frd.exchange import run_round
from frd.ledger import Ledger

TINY = dict(rounds=3, iterations_per_round=2, devices=6, samples_per_device=20)
K = 2


def _without_timings(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=["compute_s"], errors="ignore").reset_index(drop=True)


def test_sampling_is_seeded_by_run_seed_and_round_only():
    config = cls_config(devices=10, clients_per_round=3)
    draws = [sampled_devices(config, 0, r) for r in range(8)]
    assert draws == [sampled_devices(config, 0, r) for r in range(8)]
    assert all(len(d) == 3 == len(set(d)) and d == sorted(d) and 0 <= d[0] and d[-1] < 10 for d in draws)
    assert len({tuple(d) for d in draws}) > 4, "rounds draw afresh"
    assert draws != [sampled_devices(config, 1, r) for r in range(8)], "another seed, other draws"
    other_method = cls_config("fd", devices=10, clients_per_round=3)
    assert draws == [sampled_devices(other_method, 0, r) for r in range(8)], "methods of a folder share the draws"
    assert sampled_devices(cls_config(devices=10), 0, 3) == list(range(10)), "default: every device"


@pytest.mark.parametrize("fraction, least, expected", [(0.3, 1, 3), (0.7, 1, 7), (0.05, 1, 1), (0.05, 4, 4), (1.0, 1, 10)])
def test_fraction_samples_floor_of_c_times_devices_but_at_least_min_clients(fraction, least, expected):
    assert cls_config(devices=10, fraction=fraction, min_clients=least).participants_per_round == expected
    assert cls_config(devices=100, fraction=0.57).participants_per_round == 57  # 0.57 · 100 = 56.99… in floats


def test_a_run_samples_the_same_devices_alone_and_beside_other_seeds_and_methods(digits, tmp_path):
    flags = dict(dataset="digits", clients_per_round=K, **TINY)
    together = run_experiment(cls_configs("fl,fd", seeds=2, **flags), tmp_path / "together", progress=False)
    alone = run_experiment(cls_configs("fd", seeds=1, first_seed=1, **flags), tmp_path / "alone", progress=False)
    for table in ("ledger", "rounds"):
        mates = pd.read_csv(together.out / f"{table}.csv")
        pd.testing.assert_frame_equal(_without_timings(mates[mates["run_id"] == "fd-seed1"]),
                                      _without_timings(pd.read_csv(alone.out / f"{table}.csv")))


def test_the_ledger_charges_the_sampled_uploads_and_the_next_rounds_downloads_only(digits):
    config = cls_config(clients_per_round=K, **TINY)
    ledger = run_seed(config, 0, digits)["ledger"]
    weights_bits = int(ledger["bits"].iloc[0])
    for round_ in range(1, TINY["rounds"] + 1):
        rows = ledger[ledger["round"] == round_]
        assert rows[rows["direction"] == "up"]["participant"].tolist() == sampled_devices(config, 0, round_)
        assert rows[rows["direction"] == "down"]["participant"].tolist() == sampled_devices(config, 0, round_ + 1)
    assert len(ledger) == 2 * K * TINY["rounds"] and (ledger["bits"] == weights_bits).all()


def test_full_participation_named_explicitly_gives_the_default_tables(digits):
    default = run_seed(cls_config("fd", **TINY), 0, digits)
    everyone = run_seed(cls_config("fd", clients_per_round=TINY["devices"], **TINY), 0, digits)
    for table in ("ledger", "rounds"):
        pd.testing.assert_frame_equal(_without_timings(everyone[table]), _without_timings(default[table]))


def test_fedavg_over_the_participants_on_a_hand_example(digits):
    """Devices 1 and 3 take part: the average is (n1·2 + n3·4)/(n1 + n3); devices 0 and 1 (the next
    round's) download it; devices 2 and 3 keep their weights."""
    ctx = RunContext.build(cls_config(partition="dirichlet", alpha=0.3, devices=4, min_samples=5), 0, digits)
    n = ctx.sample_counts
    assert n[1] != n[3], "unequal devices, so weighting matters"
    fl = FedAvg(ctx)
    size = ctx.devices.flat(0).size
    for d in range(4):
        ctx.devices.load_flat(d, np.full(size, float(d + 1)))
    ledger = Ledger()
    run_round(fl, [1, 3], run_id="fl-seed0", round_=1, ledger=ledger, receivers=[0, 1])
    expected = (n[1] * 2.0 + n[3] * 4.0) / (n[1] + n[3])
    np.testing.assert_allclose(ctx.devices.flat(0), expected, rtol=1e-6)
    np.testing.assert_allclose(ctx.devices.flat(1), expected, rtol=1e-6)
    assert (ctx.devices.flat(2) == 3.0).all() and (ctx.devices.flat(3) == 4.0).all()
    charged = ledger.frame()
    assert charged[["participant", "direction"]].values.tolist() == [[1, "up"], [3, "up"], [0, "down"], [1, "down"]]


def _watch(made, method: str, config, digits):
    """Each device's weights, data-stream position and (FD) teacher, before round 1 and after each round."""
    built = made(method)
    states: list[dict] = []

    def snapshot() -> None:
        m = built[0]
        states.append({d: (m.ctx.devices.flat(d), m.ctx.stream.snapshot(d)["stream_rng"].tobytes(),
                           m.ctx.stream.buffers[d].copy(),
                           m.teachers[d].numpy().copy() if hasattr(m, "teachers") else None)
                       for d in range(config.devices)})

    def wrap(m):
        snapshot()
        return m

    run_seed(config, 0, digits, on_round=snapshot, wrap=wrap)
    return states


def test_fd_devices_that_sit_a_round_out_are_untouched_bit_for_bit(made, digits):
    config = cls_config("fd", clients_per_round=K, **TINY)
    states = _watch(made, "fd", config, digits)
    idle = 0
    for round_ in range(1, TINY["rounds"] + 1):
        before, after = states[round_ - 1], states[round_]
        trained, receivers = sampled_devices(config, 0, round_), sampled_devices(config, 0, round_ + 1)
        for d in range(config.devices):
            weights, rng, buffer, teacher = after[d]
            if d in trained:
                assert not np.array_equal(weights, before[d][0]), "a participant trains"
                continue
            idle += 1
            assert weights.tobytes() == before[d][0].tobytes() and rng == before[d][1]
            assert np.array_equal(buffer, before[d][2])
            if d not in receivers:
                assert np.array_equal(teacher, before[d][3], equal_nan=True)
    assert idle == TINY["rounds"] * (config.devices - K)


def test_fl_devices_neither_sampled_nor_next_are_untouched_and_the_next_start_from_the_average(made, digits):
    config = cls_config("fl", clients_per_round=K, **TINY)
    states = _watch(made, "fl", config, digits)
    for round_ in range(1, TINY["rounds"] + 1):
        before, after = states[round_ - 1], states[round_]
        trained, receivers = sampled_devices(config, 0, round_), sampled_devices(config, 0, round_ + 1)
        for d in set(range(config.devices)) - set(trained) - set(receivers):
            assert after[d][0].tobytes() == before[d][0].tobytes()
        first, *rest = receivers
        assert all(np.array_equal(after[first][0], after[d][0]) for d in rest), "one broadcast"


def test_an_outage_of_a_sampled_device_is_recorded_and_left_out(digits, drop1):
    config = cls_config(clients_per_round=3, channel=drop1, **TINY)
    rounds = [r for r in range(1, TINY["rounds"] + 1) if 1 in sampled_devices(config, 0, r)]
    assert rounds, "device 1 is sampled at least once"
    ledger = run_seed(config, 0, digits)["ledger"]
    up = ledger[ledger["direction"] == "up"]
    lost = up[~up["delivered"]]
    assert lost["participant"].tolist() == [1] * len(rounds) and lost["round"].tolist() == rounds
    assert len(up) == 3 * TINY["rounds"]


TINY_FLAGS = ["--seeds", "1", "--rounds", "1", "--iterations", "1", "--devices", "4", "--no-progress"]


@pytest.mark.parametrize("args, message", [
    (["--clients-per-round", "0"], "--clients-per-round must lie in 1..4 (--devices), got 0"),
    (["--clients-per-round", "5"], "--clients-per-round must lie in 1..4 (--devices), got 5"),
    (["--fraction", "0"], "--fraction must lie in (0, 1], got 0.0"),
    (["--fraction", "1.5"], "--fraction must lie in (0, 1], got 1.5"),
    (["--fraction", "0.5", "--clients-per-round", "2"], "give --clients-per-round or --fraction, not both"),
    (["--min-clients", "2"], "--min-clients 2 applies with --fraction only"),
    (["--fraction", "0.5", "--min-clients", "5"], "--min-clients must lie in 1..4"),
    (["--partition", "shards", "--shards-per-client", "0"], "--shards-per-client must be at least 1, got 0"),
    (["--partition", "shards", "--shards-per-client", "3", "--samples-per-device", "10"],
     "cannot cut 10 samples per device into 3 equal shards"),
    (["--partition", "shards", "--samples-per-device", "500"], "cannot give 4 devices 500 samples each"),
    (["--method", "nopartial", "--clients-per-round", "2"], "nopartial does not support partial participation"),
])
def test_bad_participation_and_shard_input_is_one_line_exit_2_and_writes_nothing(args, message, tmp_path, capsys,
                                                                                 monkeypatch):
    class NoPartial(FedAvg):
        partial_participation = False

    monkeypatch.setitem(CLS_METHODS, "nopartial", NoPartial)
    assert main(["cls", *TINY_FLAGS, *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_method_that_does_not_say_it_supports_sampling_still_runs_with_every_device(digits, monkeypatch):
    class NoPartial(FedAvg):
        partial_participation = False

    monkeypatch.setitem(CLS_METHODS, "nopartial", NoPartial)
    run_seed(cls_config("nopartial", **TINY), 0, digits)


def test_flower_refuses_partial_participation_in_one_line(capsys):
    assert main(["flower", "sim", "--method", "fl", "--devices", "4", "--clients-per-round", "2", "--out", "never"]) == 2
    err = capsys.readouterr().err
    assert "frd flower runs every device in every round" in err and err.count("\n") == 1


def test_the_resume_key_leaves_the_new_fields_out_at_their_defaults():
    assert not {"clients_per_round", "fraction", "min_clients", "shards_per_client"} & set(cls_config().resume_key().common)
    assert cls_config(devices=10, fraction=0.5).resume_key().common["fraction"] == 0.5


@pytest.mark.parametrize("method, options", [
    ("fd", {}),
    ("mix2fld", dict(n_mix=4, n_inv=4, server_iterations=2)),
    ("feddm", dict(ipc=1, distill_iterations=1, server_epochs=1, width=8)),
])
def test_every_kind_of_method_trains_and_charges_only_the_sampled_devices(method, options, digits, made):
    built = made(method)
    config = cls_config(method, clients_per_round=K, **{**TINY, "rounds": 2}, **options)
    ledger = run_seed(config, 0, digits)["ledger"]
    for round_ in range(config.rounds + 1):
        up = ledger[(ledger["round"] == round_) & (ledger["direction"] == "up")]["participant"].tolist()
        assert up == (sampled_devices(config, 0, round_) if round_ or method == "mix2fld" else [])
    if method == "feddm":
        times = [sum(d in sampled_devices(config, 0, r) for r in (1, 2)) for d in range(config.devices)]
        assert built[0].distilled_rounds.tolist() == times
