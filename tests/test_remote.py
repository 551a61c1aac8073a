"""The remote exchange without Flower: each device answers through a loopback link, rebuilt from
its saved state for every message as a Flower node is. The ledger is identical to in-process;
accuracy and loss agree to ``RTOL``: a node trains its device as a one-row vmapped stack, which may
differ from that device's row of the full stack in the last bits (here: identical for these
small runs; up to 1.7e-7 in loss over 16 FL rounds of 10 devices)."""
import time

import pandas as pd
import pytest

from frd.classification.methods import cls_config
from frd.classification.remote import participant_reply, resolved, run_remote
from frd.classification.runner import run_seed
from frd.remote import TRANSPORT_COLUMNS

RTOL = 1e-5
"""Relative tolerance on accuracy and loss between a remote and an in-process run."""
CASES = {"fl": {}, "fd": {}, "mix2fld": dict(n_mix=10, server_iterations=10),
         "feddualmatch": dict(width=8, ipc=2, distill_iterations=3, server_epochs=1),
         "fl, top-k with error feedback up, q4 down": dict(codec_up="topk:0.1+q8", codec_down="q4", error_feedback=True),
         "fd, q8 up": dict(codec_up="q8"),
         "mix2fld, q8 up, fp16 down": dict(n_mix=10, server_iterations=10, codec_up="q8", codec_down="fp16"),
         "feddualmatch, q8 both ways": dict(width=8, ipc=2, distill_iterations=3, server_epochs=1, codec_up="q8",
                                            codec_down="q8")}


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


@pytest.mark.parametrize("case", list(CASES))
def test_remote_devices_give_the_in_process_tables(digits, case):
    method = case.partition(",")[0]
    config = cls_config(method, rounds=2, iterations_per_round=5, devices=3, **CASES[case])
    local = run_seed(config, 0, digits)
    link = Loopback(config, digits)
    remote = run_remote(config, 0, digits, link)
    transport = remote["transport"]
    for table in ("runs", "rounds"):  # compute_s is wall-clock time
        pd.testing.assert_frame_equal(remote[table].drop(columns="compute_s"), local[table].drop(columns="compute_s"),
                                      check_exact=False, rtol=RTOL)
    assert remote["ledger"].equals(local["ledger"])
    charged = local["ledger"][["round", "participant", "direction", "kind", "bits"]]
    assert list(transport.columns) == TRANSPORT_COLUMNS
    assert transport[charged.columns].equals(charged)
    assert (transport["wire_bytes"] * 8 >= transport["bits"]).all()
    # round 1's upload, then each download carrying the next round's upload; Mix2FLD first sends seed samples
    assert link.messages == config.rounds + 1 + (method == "mix2fld")


@pytest.mark.parametrize("method, options, column", [
    # a 4-device dirichlet split at alpha 0.01 leaves a device too few labels for 20 mixes
    ("mix2fld", dict(partition="dirichlet", alpha=0.01, min_samples=2, devices=4, n_mix=20, server_iterations=1),
     "seed_shortfall"),
    ("feddualmatch", dict(devices=2, width=8, ipc=1, distill_iterations=2, server_epochs=1, dp_noise=100.0, dp_clip=0.5),
     "dp_epsilon"),
])
def test_figures_counted_on_the_devices_reach_runs_csv(digits, method, options, column):
    """The server's copy of the method never runs the devices' side: what they count (a seed
    shortfall, the rounds a DP budget spends) must come back in their reports."""
    config = cls_config(method, rounds=1, iterations_per_round=1, **options)
    local = run_seed(config, 0, digits)["runs"].drop(columns="compute_s")
    remote = run_remote(config, 0, digits, Loopback(config, digits))["runs"].drop(columns="compute_s")
    assert local[column].iloc[0] > 0
    pd.testing.assert_frame_equal(remote, local, check_exact=False, rtol=RTOL)
