"""Saved models: every run's final networks, and ``frd eval``, which plays or tests them again.

A run saves its networks as ``OUT/models/<run_id>.pt`` with its tables (``frd.results``: the same
atomic writes, the file's sha256 in the run's manifest): RL every agent's actor and critic,
classification the global model or, where a method keeps none (FD), every device's. The file is a
plain ``torch.save`` of a dict holding only strings, numbers, lists and tensors, no pickled objects,
so ``torch.load(path, weights_only=True)`` reads it::

    {"format": "frd-models/1", "metadata": {"domain": ..., ...}, "state_dicts": {name: state_dict}}

``metadata`` holds what rebuilds each network (the domain's own keys); each state dict loads into
a plain torch module. ``frd eval OUT`` hands a folder's saved models to the domain named in them,
which scores them, and writes its rows as ``OUT/eval.csv``; of an experiment record, each cell's
(``frd.report.recorded_cells``), and all of them in the record's ``eval.csv``. ``--run ID`` scores
that run alone (of a record, in every cell that holds it), so one run is checked without playing
the others; an id naming no finished run is refused, listing some that exist.
"""
from __future__ import annotations

import argparse
import difflib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

import pandas as pd

from frd.domains import get_domain
from frd.errors import FrdError
from frd.results import MODELS, ResultStore, atomic_write_csv

if TYPE_CHECKING:
    import torch

    from frd.report import Cell

FORMAT = "frd-models/1"
"""The layout above; a file of another layout is refused."""
EVAL_TABLE = "eval.csv"


@dataclass(frozen=True)
class SavedModels:
    """One run's saved file: what rebuilds its networks, and their weights by network name."""

    path: Path
    metadata: dict[str, Any]
    state_dicts: dict[str, dict[str, torch.Tensor]]


@dataclass(frozen=True)
class EvalRequest:
    """``frd eval``'s options (None: not given; each domain takes the ones that mean something to it)."""

    episodes: int | None = None
    seed: int | None = None
    video: Path | None = None
    run: str | None = None
    """Score only this run (a ``run_id`` of ``runs.csv``): the domain is handed its models alone."""


def models_file(domain: str, metadata: Mapping[str, Any], state_dicts: Mapping[str, Mapping[str, torch.Tensor]]) -> bytes:
    """The bytes of a saved-models file (the same networks and metadata give the same bytes)."""
    import torch  # here: the core's other modules need no torch

    saved = {"format": FORMAT, "metadata": {"domain": domain, **metadata},
             "state_dicts": {name: dict(state) for name, state in state_dicts.items()}}
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    return buffer.getvalue()


def read_models(path: Path) -> SavedModels:
    """A saved-models file, read with ``weights_only=True``; a damaged or foreign one is one line."""
    import torch

    try:
        saved = torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a damaged zip or pickle can raise anything; one line says which file
        raise FrdError(f"{path} cannot be read ({type(exc).__name__}); rerun the command that made its folder "
                       "to save it again") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise FrdError(f"{path} is not a saved-models file of this frd (format {FORMAT})")
    return SavedModels(path, saved["metadata"], saved["state_dicts"])


def evaluate(out: Path, request: EvalRequest) -> tuple[pd.DataFrame, str]:
    """Score the saved models of every finished run in ``out`` (``eval.csv``'s rows) and the table
    to print; ``eval.csv`` is written."""
    frame, table = _scores(out, request)
    atomic_write_csv(frame, out / EVAL_TABLE)
    return frame, table


def _scores(out: Path, request: EvalRequest) -> tuple[pd.DataFrame, str]:
    """``evaluate`` without writing: every error is found before anything is written."""
    if not (out / "config.json").is_file():
        raise FrdError(f"{out} is not a results folder of frd (it has no config.json)")
    store = ResultStore.existing(out)
    found = sorted(p.stem for p in (out / MODELS).glob("*.pt"))
    finished = store.verified(left_out="is left out") if found or request.run is not None else {}
    if request.run is not None:
        if request.run not in finished:
            raise FrdError(f"--run {request.run} names no finished run of {out}{_some(request.run, finished)}")
        if request.run not in found:
            raise FrdError(f"run {request.run} of {out} saved no models ({MODELS}/{request.run}.pt): runs saved by "
                           "an older frd or over Flower (RL) keep none; rerun it into a new --out")
        found = [request.run]
    paths = [store.models(rid) for rid in found if rid in finished]
    if not paths:
        raise FrdError(f"{out} holds no saved models of finished runs ({MODELS}/<run_id>.pt): runs saved by an "
                       "older frd or over Flower (RL) keep none; rerun them into a new --out")
    saved = [read_models(path) for path in paths]
    names = sorted({str(s.metadata.get("domain")) for s in saved})
    if len(names) > 1:
        raise FrdError(f"{out}/{MODELS} mixes models of the domains {', '.join(names)}")
    domain = get_domain(names[0])
    if not hasattr(domain, "evaluate"):
        raise FrdError(f"the {names[0]} domain cannot evaluate saved models")
    return domain.evaluate(saved, request)


def evaluate_record(out: Path, request: EvalRequest, cells: Sequence[Cell]) -> list[tuple[Cell, pd.DataFrame, str]]:
    """``evaluate`` of each cell of an experiment record (``frd.report.recorded_cells``), every cell
    scored before any ``eval.csv`` is written; ``out/eval.csv`` gathers their rows behind the cells'
    sweep values."""
    from frd.report import with_axes  # here: a domain imports this module, and needs no report

    if not cells:
        raise FrdError(f"{out} holds no finished runs yet")
    if request.run is not None:  # the cells that hold the run; in none, the ids they hold
        held = [set(ResultStore.existing(cell.folder).verified(left_out="is left out")) for cell in cells]
        cells = [cell for cell, runs in zip(cells, held) if request.run in runs]
        if not cells:
            every = set().union(*held)
            raise FrdError(f"--run {request.run} names no finished run in any cell of {out}{_some(request.run, every)}")
    scored = [(cell, *_scores(cell.folder, request)) for cell in cells]
    for cell, frame, _ in scored:
        atomic_write_csv(frame, cell.folder / EVAL_TABLE)
    atomic_write_csv(pd.concat([with_axes(frame, cell, False) for cell, frame, _ in scored], ignore_index=True),
                     out / EVAL_TABLE)
    return scored


def _some(wanted: str, ids: Collection[str], shown: int = 5) -> str:
    """``; it holds a, b, … (n runs)``: the ids spelt most like ``wanted`` first, then in order."""
    if not ids:
        return "; it holds no finished runs yet"
    ordered = list(dict.fromkeys([*difflib.get_close_matches(wanted, sorted(ids), n=3), *sorted(ids)]))
    more = f", … ({len(ordered)} runs)" if len(ordered) > shown else ""
    return f"; it holds {', '.join(ordered[:shown])}{more}"


def _run(args: argparse.Namespace) -> int:
    for flag, value, least in (("--episodes", args.episodes, 1), ("--seed", args.seed, 0)):
        if value is not None and value < least:
            raise FrdError(f"{flag} must be at least {least}, got {value}")
    out = Path(args.out)
    from frd.report import recorded_cells

    request = EvalRequest(args.episodes, args.seed, None if args.video is None else Path(args.video), args.run_id)
    cells = recorded_cells(out)
    if cells is None:
        print(evaluate(out, request)[1])
    else:
        print("\n\n".join(f"== {cell.folder.name} ==\n{table}" for cell, _, table in evaluate_record(out, request, cells)))
    print(f"\n{EVAL_TABLE} in {out}/")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """``frd eval OUT``: the saved models of a results folder, played (RL) or tested (classification)."""
    p = subparsers.add_parser("eval", help="play or test the saved agents and models of a results folder or experiment",
                              description="RL: each saved agent plays --episodes episodes greedily (argmax) and "
                              "with sampled actions; mean ± std return per agent. Classification: each saved "
                              f"model's accuracy on the test set. The rows are written as OUT/{EVAL_TABLE} (an experiment's: "
                              "each cell's, and all of them behind their sweep values).")
    p.add_argument("out", metavar="OUT", help="a results folder of frd rl, compare or cls, or an experiment (frd run's --out)")
    p.add_argument("--episodes", type=int, metavar="N", help="RL: episodes per agent and way of acting (default 100)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="RL: seed of the episodes' first states and of the sampled actions (default 0)")
    p.add_argument("--run", dest="run_id", metavar="ID", help="score only this run (a run_id of runs.csv, e.g. frd-seed3; of an "
                   f"experiment, in every cell that holds it); OUT/{EVAL_TABLE} then holds its rows alone")
    p.add_argument("--video", metavar="DIR", help="RL: also record each agent's first greedy episode in DIR "
                   "(gymnasium's RecordVideo; needs moviepy)")
    p.set_defaults(run=_run)
