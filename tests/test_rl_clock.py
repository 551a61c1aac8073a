"""The virtual clock in RL (``frd.rl.clock``): an agent's FLOPs by hand, episode times read off its steps,
a round's timeline, unequal devices under --until all, deadlines, and the refusals."""
from __future__ import annotations

import pandas as pd
import pytest

from frd.agents.a2c import A2CConfig
from frd.clock import Devices
from frd.errors import FrdError
from frd.rl.clock import distill_flops, step_flops
from frd.rl.config import rl_config
from frd.rl.runner import iter_simulate

TINY = dict(agents=3, hidden=8, activation="relu", max_episodes=12, target=30.0, window=3, period=4)


def tables(methods, seeds=(0,), **values) -> dict[str, pd.DataFrame]:
    config = rl_config(methods, **{**TINY, **values})
    found = list(iter_simulate(config, [(m, s) for s in seeds for m in config.methods]))
    return {name: pd.concat([t[name] for t in found], ignore_index=True) for name in ("episodes", "ledger", "runs")}


def test_an_agents_step_and_minibatch_by_hand():
    c = A2CConfig(hidden=8, n_steps=5)
    actor, critic = 4 * 8 + 8 * 8 + 8 * 2, 4 * 8 + 8 * 8 + 8 * 1  # CartPole: 4 → 8 → 8 → 2 and → 1
    params = (4 * 8 + 8) + (8 * 8 + 8) + (8 * 2 + 2) + (4 * 8 + 8) + (8 * 8 + 8) + (8 + 1)
    assert step_flops(c, 4, 2, "CartPole-v1") == pytest.approx(2 * actor + 6 * (actor + critic) + 4 * params / 5 + 100)
    assert distill_flops(c, 4, 2, 64) == 6 * actor * 64 + 4 * ((4 * 8 + 8) + (8 * 8 + 8) + (8 * 2 + 2))


def test_without_rounds_an_episodes_time_is_its_steps_at_the_devices_rate():
    out = tables("independent")
    config = rl_config("independent", **TINY)
    per_step = step_flops(config.agent_configs()[0], 4, 2, "CartPole-v1") / config.device_flops
    episodes = out["episodes"]
    assert episodes["sim_s"].tolist() == pytest.approx((episodes["env_steps"] * per_step).tolist())
    assert (out["ledger"].empty and out["runs"]["sim_s"].item() >= episodes["sim_s"].max())


def test_after_a_sync_round_every_agent_resumes_when_the_round_ended():
    out = tables("frl")
    config = rl_config("frl", **TINY)
    per_step = step_flops(config.agent_configs()[0], 4, 2, "CartPole-v1") / config.device_flops
    ledger, episodes = out["ledger"], out["episodes"]
    first = ledger[ledger["round"] == 1]
    up = first[first["direction"] == "up"].set_index("participant").sort_index()
    at_barrier = episodes[episodes["episode"] == TINY["period"]].set_index("agent").sort_index()
    assert up["sim_s"].tolist() == pytest.approx((at_barrier["env_steps"] * per_step).tolist())  # ideal channel
    ended = first[first["direction"] == "down"]["sim_s"].max()
    assert ended == pytest.approx(up["sim_s"].max() + 3 * (up["bits"].iloc[0] // 32) / config.server_flops)
    after = episodes[episodes["episode"] == TINY["period"] + 1].set_index("agent").sort_index()
    assert after["sim_s"].tolist() == pytest.approx(
        (ended + (after["env_steps"] - at_barrier["env_steps"]) * per_step).tolist())


def test_with_unequal_devices_the_mission_is_the_first_completion_in_seconds():
    out = tables("pd", seeds=(0, 1), speed_spread=1.0, until="all", max_episodes=40)
    assert out["runs"]["completed"].all(), "the checks below need completed runs"
    for run_id, run in out["runs"].set_index("run_id").iterrows():
        episodes = out["episodes"][out["episodes"]["run_id"] == run_id]
        if run["completed"]:
            done = episodes.groupby("agent").apply(lambda e: e["sim_s"].iloc[-1] if len(e) else None)
            assert run["mission_sim_s"] <= done.max() and run["mission_sim_s"] in set(episodes["sim_s"])
    rates = Devices(rl_config("pd", **TINY, speed_spread=1.0, until="all").clock(), 0, 3).rates
    assert len(set(rates)) == 3
    same = tables("pd", seeds=(0,), until="all", max_episodes=40)
    spread = tables("pd", seeds=(0,), speed_spread=1.0, until="all", max_episodes=40)
    pd.testing.assert_frame_equal(spread["episodes"].drop(columns="sim_s"), same["episodes"].drop(columns="sim_s"))


def test_a_deadline_leaves_late_uploads_out_of_the_round():
    sync = tables("frl", speed_spread=1.0, until="all")
    up = sync["ledger"][(sync["ledger"]["round"] == 1) & (sync["ledger"]["direction"] == "up")]
    deadline = (up["sim_s"].min() + up["sim_s"].max()) / 2
    late = tables("frl", speed_spread=1.0, until="all", round_policy=f"deadline:{deadline}")
    first = late["ledger"][(late["ledger"]["round"] == 1) & (late["ledger"]["direction"] == "up")]
    assert first["late"].tolist() == (first["sim_s"] > deadline).tolist() and 0 < first["late"].sum() < 3
    assert not sync["ledger"]["late"].any()


@pytest.mark.parametrize(("values", "match"), [
    (dict(speed_spread=0.5), "needs --until all"),
    (dict(speed_spread=-0.5, until="all"), "--speed-spread"),
    (dict(round_policy="deadline:-1"), "positive"),
    (dict(device_flops=0.0), "--device-flops"),
])
def test_refusals(values, match):
    with pytest.raises(FrdError, match=match):
        rl_config("frl", **TINY, **values).validate()
