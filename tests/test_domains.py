"""Domains are plug-ins: the installed ones are found through their entry points, and a third
one (``toy_domain``: federated mean estimation) runs through the ``frd`` command by one registry
line, with the exchange contract and the ledger of the others. Its Ray run is in test_backends."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import toy_domain

import frd.domains
from frd.classification.methods import CLS_METHODS
from frd.cli import main
from frd.domains import REGISTRY, domains, get_domain
from frd.errors import FrdError
from frd.rl.methods import RL_METHODS


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(REGISTRY, "mean", toy_domain.DOMAIN)  # what its entry point would do


def test_the_installed_domains_are_found_by_name():
    assert list(domains()) == ["cls", "rl"]
    assert get_domain("rl").methods is RL_METHODS and get_domain("cls").methods is CLS_METHODS
    with pytest.raises(FrdError, match="unknown domain 'mean'; installed: cls, rl"):
        get_domain("mean")


def test_without_an_installed_domain_the_command_says_how_to_fix_it(monkeypatch, capsys):
    monkeypatch.setattr(frd.domains, "entry_points", lambda group: [])
    monkeypatch.setattr(frd.domains, "REGISTRY", {})
    assert main(["rl", "--out", "x"]) == 2
    assert capsys.readouterr().err == "frd: error: no frd domain is installed (entry points frd.domains); " \
                                      "reinstall frd: pip install -e .\n"


def test_a_toy_domain_runs_through_the_command_with_the_ledger(toy, tmp_path, capsys):
    out = tmp_path / "mean"
    assert main(["mean", "--participants", "4", "--seeds", "3", "--out", str(out)]) == 0
    runs, ledger = pd.read_csv(out / "runs.csv"), pd.read_csv(out / "ledger.csv")
    assert list(runs["seed"]) == [0, 1, 2] and np.allclose(runs["estimate"], runs["truth"], atol=1e-5)
    assert len(ledger) == 3 * 2 * 4 and set(ledger["bits"]) == {64, 32}  # (mean, count) up, the average down
    assert list(runs["bits_up"]) == [4 * 64] * 3 and list(runs["bits_down"]) == [4 * 32] * 3
    assert "estimate" in capsys.readouterr().out
    assert main(["mean", "--participants", "5", "--out", str(out)]) == 2, "another experiment's folder"
    assert "different experiment" in capsys.readouterr().err
