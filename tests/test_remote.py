"""The remote exchange without Flower: each device answers through a loopback link, rebuilt from
its saved state for every message as a Flower node is. Per-device training (a one-row device
stack) gives the same bits as the vmapped stack of every device on this torch build, so the
tables are identical to in-process, not merely close."""
import time

import pytest

from classification.methods import cls_config
from classification.remote import participant_reply, resolved, run_remote
from classification.runner import run_seed
from frd.remote import TRANSPORT_COLUMNS

CASES = {"fl": {}, "fd": {}, "mix2fld": dict(n_mix=10, server_iterations=10),
         "feddualmatch": dict(width=8, ipc=2, distill_iterations=3, server_epochs=1)}


class Loopback:
    """A link whose participants run here, their state kept only as the bytes they returned."""

    def __init__(self, config, data):
        self.config, self.data, self.state = resolved(config), data, {}
        self.messages = 0

    def send(self, requests):
        self.messages += 1
        out = {}
        for p, request in requests.items():
            started = time.perf_counter()
            reply, self.state[p] = participant_reply(self.config, self.data, p, request, self.state.get(p))
            out[p] = (reply, time.perf_counter() - started)
        return out




@pytest.mark.parametrize("method", list(CASES))
def test_remote_devices_give_the_in_process_tables(digits, method):
    config = cls_config(method, rounds=2, iterations_per_round=5, devices=3, **CASES[method])
    local = run_seed(config, 0, digits)
    link = Loopback(config, digits)
    remote = run_remote(config, 0, digits, link)
    transport = remote["transport"]
    for table in ("runs", "rounds"):  # compute_s is wall-clock time
        assert remote[table].drop(columns="compute_s").equals(local[table].drop(columns="compute_s"))
    assert remote["ledger"].equals(local["ledger"])
    charged = local["ledger"][["round", "participant", "direction", "kind", "bits"]]
    assert list(transport.columns) == TRANSPORT_COLUMNS
    assert transport[charged.columns].equals(charged)
    assert (transport["wire_bytes"] * 8 >= transport["bits"]).all()
    # round 1's upload, then each download carrying the next round's upload; Mix2FLD first sends seed samples
    assert link.messages == config.rounds + 1 + (method == "mix2fld")
