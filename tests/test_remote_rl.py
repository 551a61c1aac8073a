"""RL agents as remote participants, without Flower: each agent answers through a loopback link,
either kept alive between messages (as a warm runner keeps it) or replayed from what the server
sent it for every message (as a fresh process must). Every table is identical to the same run in
process, bit for bit (only compute_s, wall-clock time, differs).

Budgets are tiny (hidden 8, a low mission score, short periods) and the seeds are chosen so each
case crosses its path: a completion that ends the run while another agent played on, agents that
retire while others go on with rounds, a channel that loses transfers, learners with different
rollout lengths (rounds then wait for the lcm of them)."""
import numpy as np
import pytest
from plugin_methods import PartialFRL

import frd.rl.remote
from frd.errors import FrdError
from frd.remote import TRANSPORT_COLUMNS
from frd.rl.config import rl_config
from frd.rl.methods import RL_METHODS
from frd.rl.remote import AgentReplay, LiveAgents, LocalAgents, RoundInput, check_remote, run_remote
from frd.rl.runner import iter_simulate
from frd.wire import decode

LOW = dict(hidden=8, target=30.0, period=5, max_episodes=40)
CASES = {
    "frl": ("frl", dict(LOW, target=490.0, period=10, max_episodes=30), 0),
    "pd, one agent completes while the other played on": ("pd", LOW, 6),
    "frd, until all, own teachers, lossy channel": (
        "frd", dict(LOW, agents=3, until="all", distill_target="others", channel="wireless",
                    channel_options=(("p_up_dbm", 15.0),)), 3),
    "pd, mixed learners, best agent's memory, relabelled": (
        "pd", dict(hidden=8, max_episodes=30, period=10, agent_spec="h=8;recipe=rlcode,h=4", distill_target="best",
                   leader_distills=False, distill_policy="current"), 0),
    "independent": ("independent", dict(LOW, target=490.0, max_episodes=20), 0),
    "frl, top-k with error feedback up, q4 down": (
        "frl", dict(LOW, target=490.0, period=10, max_episodes=30, codec_up="topk:0.1+q8", codec_down="q4",
                    error_feedback=True), 0),
    "pd, q8 both ways": ("pd", dict(LOW, codec_up="q8", codec_down="q8"), 6),
}


class Loopback(LocalAgents):
    """Agents answering here; counts requests and the episodes the agents played (the server may drop some)."""

    def __init__(self, config):
        super().__init__(config)
        self.messages, self.requests, self.played = 0, 0, 0

    def send(self, requests):
        self.messages += 1
        self.requests += len(requests)
        out = super().send(requests)
        self.played += sum(len(decode(reply.report)["clock"]) for reply, _ in out.values())
        return out


@pytest.mark.parametrize("kept_alive", [True, False], ids=["kept alive", "replayed"])
@pytest.mark.parametrize("case", list(CASES))
def test_remote_agents_give_the_in_process_tables_bit_for_bit(case, kept_alive, monkeypatch):
    method, values, seed = CASES[case]
    config = rl_config(method, **values)
    (local,) = iter_simulate(config, [(method, seed)])
    link = Loopback(config)
    monkeypatch.setattr(frd.rl.remote, "LIVE", LiveAgents(size=64 if kept_alive else 0))
    replays = []  # each AgentReplay built is one replay from the seed
    build = AgentReplay.__init__
    monkeypatch.setattr(AgentReplay, "__init__", lambda self, *args: (replays.append(args[3]), build(self, *args))[1])
    remote = run_remote(config, method, seed, link)
    assert len(replays) == (len(set(replays)) if kept_alive else link.requests)  # kept alive: one replay per agent
    assert link.requests > len(set(replays)) or method == "independent"  # (which has no rounds)
    for table in ("episodes", "ledger", "rounds"):
        assert remote[table].equals(local[table]), table
    assert remote["runs"].drop(columns="compute_s").equals(local["runs"].drop(columns="compute_s"))
    transport, ledger = remote["transport"], local["ledger"]
    assert list(transport.columns) == TRANSPORT_COLUMNS
    run, agents = local["runs"].iloc[0], config.agents
    sent = ledger[ledger["delivered"] | (ledger["direction"] == "up")][["round", "participant", "direction", "kind", "bits"]]
    crossed = transport[transport["round"] <= run["rounds"]]  # an upload for a round the run ended before also crossed
    assert crossed[sent.columns].reset_index(drop=True).equals(sent.reset_index(drop=True))
    assert (transport[transport["round"] > run["rounds"]]["direction"] == "up").all()
    assert link.messages == run["rounds"] + 1  # each round's download rides with the next request
    if case.startswith("pd, one agent completes"):
        assert run["completed"] and link.played > len(local["episodes"])  # the other agent's extra episodes dropped
    if case.startswith("frd, until all"):
        per_round = ledger[ledger["direction"] == "up"].groupby("round")["participant"].nunique()
        assert 0 < run["agents_completed"] < agents and per_round.min() < agents  # rounds went on without the done
        assert not ledger["delivered"].all() and ledger["delivered"].any()


def test_a_round_input_survives_the_wire():
    rng = np.random.default_rng(5)
    given = RoundInput(480, {0: 31.5, 2: float("-inf")}, rng.bit_generator.state)
    assert RoundInput.decode(given.encode()) == given


@pytest.mark.parametrize("method, match", [
    ("mixfrd", "mixfrd draws its uploads from the round's generator agent after agent"),
    ("frl-partial", "frl-partial acts on all of a run's agents after every update"),
])
def test_methods_whose_agents_cannot_run_apart_are_refused(monkeypatch, method, match):
    monkeypatch.setitem(RL_METHODS, "frl-partial", PartialFRL)
    with pytest.raises(FrdError, match=match):
        check_remote(rl_config(method))


def test_a_kept_agent_serves_only_the_history_it_was_left_at_and_the_oldest_go_first():
    live, a, b, c = LiveAgents(size=2), object(), object(), object()
    live.keep(("run", 0), [b"round 1", b"download"], a)
    assert live.pop(("run", 0), [b"round 1", b"other download"]) is None
    assert live.pop(("run", 0), [b"round 1", b"download"]) is None  # dropped by the mismatch
    for key, agent in (("a", a), ("b", b), ("c", c)):
        live.keep((key,), [], agent)
    assert live.pop(("a",), []) is None and live.pop(("c",), []) is c and live.pop(("b",), []) is b
