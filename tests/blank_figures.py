"""RL figures drawn blank but written as usual: the real ones take most of a tiny run, and the
tests that use this look at the tables, or at where files are written, not at the drawing."""
from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

import frd.rl.experiment as rl_experiment
from frd.results import save_figure


def blank_figure(*args) -> None:
    save_figure(Figure(figsize=(1, 1)), next(a for a in args if isinstance(a, Path)))


def blank_rl_figures(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(rl_experiment, "plot_mission", blank_figure)
    patch.setattr(rl_experiment, "plot_payload", blank_figure)
