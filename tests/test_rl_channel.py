"""The RL side over the wireless channel: communication time counts, lost uploads stay out."""
import pandas as pd

from frd.rl.config import rl_config
from frd.rl.runner import simulate

TINY = dict(methods="frl", agents=2, seeds=1, max_episodes=4, period=2, hidden=8, channel="wireless")


def _run(**options) -> dict[str, pd.DataFrame]:
    tables = []
    simulate(rl_config(**TINY, **options), [("frl", 0)], tables.append)
    return tables[0]


def test_wireless_rounds_take_channel_time():
    tables = _run()
    ledger, runs = tables["ledger"], tables["runs"].iloc[0]
    assert runs["rounds"] >= 1 and runs["comm_s"] > 0
    assert (ledger["latency_s"] > 0).all() and ledger["delivered"].all()
    assert set(ledger["direction"]) == {"up", "down"}


def test_an_upload_that_does_not_arrive_is_left_out():
    """At −20 dBm no slot reaches θ, so every actor upload fails: the server has nothing to
    average, nobody downloads, and only delivered transfers count as communication time."""
    tables = _run(channel_options=(("p_up_dbm", -20.0),))
    ledger, runs = tables["ledger"], tables["runs"].iloc[0]
    assert runs["rounds"] >= 1
    assert (ledger["direction"] == "up").all() and not ledger["delivered"].any(), "no download rows"
    assert (ledger["latency_s"] == 0.1).all(), "each failed upload used the channel until T_max"
    assert runs["comm_s"] == 0
