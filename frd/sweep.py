"""Sweeps: ``frd run EXPERIMENT.toml`` and a domain command that sweeps (``frd rl --grid 5,10,30``,
``--sweep grid=5,10,30``) run the cells of one experiment (``frd.experiment_file``) one after
another, each through its domain's own engine, then report them (``frd.report``).

The record, in the output folder ``OUT`` [our choice]:

- ``experiment.toml``: the resolved experiment (written once every cell's config has been built
  and checked); a rerun with another experiment is refused, naming the settings that differ;
- ``cells/<cell id>/``: one results folder per cell (``grid=5``, ``method=frd,agents=2``), exactly
  as the domain's command writes it (tables, parts and manifests, ``config.json``, summary and
  figures), so resume, verification and ``frd export tensorboard`` work per cell;
- ``summary.csv`` and ``figures/``: the report across the cells;
- ``locks/<cell id>.lock``: which process runs a cell (a POSIX lock, gone with the process), so that
  several processes can share one experiment [our choice: a cell, the engine's batch, is the unit].

A rerun of the same experiment into ``OUT`` runs only the runs that are missing.
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from frd.backends import Backend, RaySession, add_backend_arguments, backend_from_args
from frd.domains import Domain, add_baseline_flag, get_domain
from frd.errors import FrdError
from frd.experiment_file import (
    CELLS,
    RECORD,
    SWEEP_FLAG,
    Command,
    Experiment,
    given_settings,
    overridden,
    read_file,
    resolve,
    shown,
    split_inline,
)
from frd.report import check_comparison, experiment_cells, report
from frd.results import SHOWN_DIFFERENCES, ResultStore, atomic_write_text, differences, locked
from frd.tensorboard import add_tensorboard_flag, require_tensorboard

LOCKS = "locks"
"""``OUT/locks/<cell id>.lock``: held by the process running that cell."""


class _Refusing(argparse.ArgumentParser):
    """A cell's arguments are checked by the domain's own parser; its complaint becomes an ``FrdError``."""

    def error(self, message: str) -> NoReturn:
        raise FrdError(message)


def add_run_flags(parser: argparse.ArgumentParser, out_help: str) -> None:
    """Where an experiment's runs go and how they run: no settings of the experiment."""
    parser.add_argument("--out", metavar="DIR", help=out_help)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_backend_arguments(parser)
    add_tensorboard_flag(parser)
    add_baseline_flag(parser)  # the report's, not a setting: no cell runs a comparison


def _run_level() -> set[str]:
    parser = argparse.ArgumentParser(add_help=False)
    add_run_flags(parser, "")
    return {o[2:] for a in parser._actions for o in a.option_strings}


def experiment_parser(domain: Domain) -> argparse.ArgumentParser:
    """The parser of ``domain``'s experiment command (``frd <domain name>``), its own flags."""
    root = _Refusing(prog="frd", add_help=False)
    commands = root.add_subparsers(parser_class=_Refusing)
    domain.register(commands)
    if domain.name not in commands.choices:
        raise FrdError(f"the domain {domain.name} has no experiment command frd {domain.name}")
    return commands.choices[domain.name]


def command(domain: Domain) -> Command:
    """The flags of ``domain``'s experiment command as the settings of an experiment."""
    return Command(domain.name, experiment_parser(domain), _run_level())


def add_sweep_flag(parser: argparse.ArgumentParser) -> None:
    """``--sweep`` on a domain's experiment command (taken off the command line before it parses:
    ``inline``)."""
    parser.add_argument(SWEEP_FLAG, action="append", metavar="KEY=V1,V2,…",
                        help="run one cell per value (repeatable: the cells are the product), the same record as frd run; "
                             "a number's or a choice's flag given as V1,V2,… sweeps too (not --method)")


def inline_axes(domain: str, argv: list[str]) -> tuple[dict[str, list[str]], list[str]] | None:
    """The axes a command line of ``domain``'s experiment command sweeps and the arguments left;
    None when it sweeps nothing (the command runs as usual)."""
    axes, rest = split_inline(command(get_domain(domain)), argv)
    return (axes, rest) if axes else None


def run_inline(domain: str, axes: dict[str, list[str]], rest: list[str], args: argparse.Namespace) -> int:
    """Run the experiment of a command line that sweeps (``rest`` parsed as ``args``: well formed)."""
    cmd = command(get_domain(domain))
    experiment = resolve(cmd, given_settings(cmd, rest), axes, f"{SWEEP_FLAG}: ")
    if not args.out:
        raise FrdError("a sweep needs --out DIR: its record goes there")
    return run_experiment_cells(experiment, Path(args.out), backend_from_args(args), not args.no_progress,
                                args.tensorboard, baseline=args.baseline)


def _checked_configs(experiment: Experiment, domain: Domain, out: Path, where: str) -> list[tuple[str, Any]]:
    """(cell id, config) of every cell, each built and checked by the domain before anything is written."""
    parser = experiment_parser(domain)
    cmd = Command(domain.name, parser, _run_level())
    configs = []
    for cell in experiment.cells():
        try:
            args = parser.parse_args([*experiment.arguments(cmd, cell), "--out", str(out / CELLS / cell.id)])
            configs.append((cell.id, domain.experiment_config(args)))
        except FrdError as exc:
            raise FrdError(f"{where}cell {cell.id}: {exc}") from None
    return configs


def _claim(out: Path, experiment: Experiment, grows: Callable[[Experiment], bool], write: bool = True) -> None:
    """``out`` holds this experiment (or nothing yet, or less of it: ``grows`` of the experiment
    it holds): write its record (unless not ``write``: ``--print``), or refuse another one."""
    record = out / RECORD
    if record.exists():
        try:
            domain, settings, axes = read_file(record)
        except FrdError as exc:
            raise FrdError(f"{record} cannot be read ({exc}); use another --out") from None
        held = Experiment.of_record(domain, settings, axes)
        changed = differences({"common": held.flat(), "methods": {}}, {"common": experiment.flat(), "methods": {}})
        if not changed:
            return
        if held.domain != experiment.domain or not grows(held):
            shown = ", ".join(changed[:SHOWN_DIFFERENCES]) + (", …" if len(changed) > SHOWN_DIFFERENCES else "")
            raise FrdError(f"{out} holds another experiment ({shown}); use another --out or delete that folder")
        print(f"{out}: the experiment grows ({', '.join(changed)}); its runs stay, only the new ones run", file=sys.stderr)
    if write:
        atomic_write_text(record, experiment.toml())


def _held_configs(held: Experiment, domain: Domain, out: Path) -> list[tuple[str, Any]] | None:
    """(cell id, config) of the experiment a record holds; None where today's flags refuse it."""
    try:
        return _checked_configs(held, domain, out, "")
    except FrdError:
        return None


def _grows(held: list[tuple[str, Any]] | None, configs: list[tuple[str, Any]]) -> bool:
    """Whether ``configs`` keep every cell of ``held``: the same id, the same resume key (so its
    runs stay valid, ``frd.results``) and its seeds among theirs. What may change: cells added
    (axis values, fewer skips), seeds added, what the key leaves out (threads) [our choice: a
    study often gains a cell or seeds; anything else is another experiment]."""
    mine = dict(configs)
    return held is not None and all(
        cell in mine and mine[cell].resume_key() == config.resume_key() and _seeds(config) <= _seeds(mine[cell])
        for cell, config in held)


def _seeds(config: Any) -> set[int]:
    """A config's run seeds (``first_seed`` 0 where a domain has none)."""
    first = getattr(config, "first_seed", 0)
    return set(range(first, first + config.seeds))


def _refuse_foreign(out: Path) -> None:
    """``out`` can hold an experiment: it is no file, nor the results of one command."""
    if (out / "config.json").exists():
        raise FrdError(f"{out} holds the results of one frd command, not an experiment; use another --out")
    if out.exists() and not out.is_dir():
        raise FrdError(f"cannot create output folder {out}: it is a file; choose another --out")


def claim(experiment: Experiment, out: Path, where: str = "", write: bool = True,
          baseline: str | None = None) -> list[tuple[str, Any]]:
    """(cell id, config) of every cell, each checked (and ``baseline``, the report's, among their
    methods), once ``out`` holds this experiment's record (written now, or found there; another
    experiment's is refused). Without ``write`` (``--print``) the same checks, and nothing is written."""
    domain = get_domain(experiment.domain)
    configs = _checked_configs(experiment, domain, out, where)
    if baseline is not None:
        check_comparison(domain, list(zip(experiment_cells(out, experiment), [c for _, c in configs])), baseline)
    _refuse_foreign(out)
    # one process at a time reads and writes the record
    with locked(out / LOCKS / "experiment.lock") if write else nullcontext():
        _claim(out, experiment, lambda held: _grows(_held_configs(held, domain, out), configs), write)
    return configs


def chosen_cells(experiment: Experiment, patterns: Sequence[str] | None, where: str = "") -> set[str] | None:
    """The ids of the cells ``--cells`` picks: those whose name (``axis=value,…`` as a table shows
    the values) or id matches one of the globs ``patterns`` (None: every cell). A glob that picks
    no cell is an error, before anything is written."""
    if not patterns:
        return None
    names = {cell.id: ",".join(f"{axis}={shown(value)}" for axis, value in cell.values.items())
             for cell in experiment.cells()}
    chosen = set()
    for pattern in patterns:
        matched = {i for i, name in names.items() if fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(i, pattern)}
        if not matched:
            raise FrdError(f"{where}--cells {pattern!r} matches no cell (frd run FILE --print lists them, "
                           f"e.g. {next(iter(names.values()))!r})")
        chosen |= matched
    return chosen


def seed_blocks(config: Any, per_pass: int | None) -> list[Any]:
    """``config``'s seeds in blocks of ``per_pass`` (first_seed … first_seed+per_pass−1, then the
    next), each a config of its own; none without ``per_pass``. Seeds are not in a cell's resume
    key, so each block adds its runs to the same cell folder."""
    if per_pass is None:
        return []
    end = config.first_seed + config.seeds
    return [replace(config, first_seed=start, seeds=min(per_pass, end - start))
            for start in range(config.first_seed, end, per_pass)]


def run_experiment_cells(experiment: Experiment, out: Path, backend: Backend, progress: bool,
                         tensorboard: str | None, where: str = "", only: set[str] | None = None,
                         per_pass: int | None = None, baseline: str | None = None) -> int:
    """Check every cell, claim ``out``, run each cell's missing runs (of the cells in ``only``,
    when given), then report them all. With ``per_pass``, every cell's first ``per_pass`` seeds
    run before any cell's next ones (``seed_blocks``), so that an experiment stopped early has
    its runs spread evenly over the cells [our choice: for studies larger than the time at hand].

    Processes sharing ``out`` split its cells: each runs the cells no other process holds
    (``LOCKS``), then waits for the others' and runs what they left (a process that died leaves
    its cell to the next), so every process ends on the whole record and reports it. The passes
    of seed blocks wait for nobody: a block held by another process is left to that last step.
    The report compares with ``baseline`` (``frd.report``; checked before anything is written)."""
    domain = get_domain(experiment.domain)
    if tensorboard is not None:
        require_tensorboard()
    configs = [(cell, config) for cell, config in claim(experiment, out, where, baseline=baseline)
               if only is None or cell in only]
    blocks = {cell: seed_blocks(config, per_pass) for cell, config in configs}

    def run(number: int, cell: str, config: Any, wait: bool, redraw: bool = False) -> bool:
        """Run the cell's missing runs of ``config`` if this process holds it (waiting for it with
        ``wait``); with ``redraw``, report ``config`` even when nothing is missing (a cell run in blocks)."""
        with locked(out / LOCKS / f"{cell}.lock", wait) as mine:
            if not mine:
                if progress:
                    print(f"cell {number}/{len(configs)}: {cell} is run by another process; later", file=sys.stderr)
                return False
            missing = not domain.run_ids(config) <= ResultStore.existing(out / CELLS / cell).finished()
            if missing or redraw:
                if progress and missing:
                    seeds = f", seeds {config.first_seed}–{config.first_seed + config.seeds - 1}" if per_pass else ""
                    print(f"cell {number}/{len(configs)}: {cell}{seeds}", file=sys.stderr)
                domain.run_experiment(config, out / CELLS / cell, backend, progress,
                                      tensorboard=None if tensorboard is None else Path(tensorboard) / cell)
            return True

    with nullcontext() if backend.name == "local" else RaySession(backend):  # one Ray for every cell
        for k in range(max(map(len, blocks.values()), default=0)):
            for number, (cell, _) in enumerate(configs, 1):
                if k < len(blocks[cell]):
                    run(number, cell, blocks[cell][k], False)
        others = [(n, cell, config) for n, (cell, config) in enumerate(configs, 1)
                  if not run(n, cell, config, False, len(blocks[cell]) > 1)]
        for number, cell, config in others:
            run(number, cell, config, True, len(blocks[cell]) > 1)
    report([out], out, baseline=baseline)
    return 0


def split_run_arguments(run: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``frd run``'s own arguments, and the flags of the experiment command given after the file
    (``frd run exp.toml --seeds 5 --backend ray``: ``--seeds 5`` overrides the file)."""
    own, overrides, words, file_seen = [], [], list(argv), False
    while words:
        word = words.pop(0)
        action = run._option_string_actions.get(word.split("=", 1)[0]) if word.startswith("-") else None
        if action is not None:
            own.append(word)
            if "=" not in word and action.nargs != 0 and words:
                own.append(words.pop(0))
        elif file_seen:
            overrides.append(word)
        else:
            own.append(word)  # the file, or a flag before it that run's parser names
            file_seen = not word.startswith("-")
    return own, overrides


def _run(args: argparse.Namespace) -> int:
    path = Path(args.experiment)
    domain_name, settings, axes = read_file(path)
    where = f"{path.name}: "
    cmd = command(get_domain(domain_name))
    experiment = resolve(cmd, *overridden(cmd, settings, axes, args.overrides), where)
    only = chosen_cells(experiment, args.cells, where)
    out = Path(args.out) if args.out else Path("results") / path.stem
    if args.print:
        _print_cells(experiment, out, only, where, args.baseline)
        return 0
    return run_experiment_cells(experiment, out, backend_from_args(args), not args.no_progress, args.tensorboard, where,
                                only, args.seeds_per_pass, args.baseline)


def _print_cells(experiment: Experiment, out: Path, only: set[str] | None, where: str,
                 baseline: str | None = None) -> None:
    """``--print``: each cell's runs and how many of them ``out`` holds finished; ``out`` checked
    as the run checks it (``claim``), nothing written."""
    domain = get_domain(experiment.domain)
    counts = {}
    for cell, config in claim(experiment, out, where, write=False, baseline=baseline):
        if only is None or cell in only:
            ids = domain.run_ids(config)
            counts[cell] = (len(ids), len(ids & ResultStore.existing(out / CELLS / cell).finished()))

    def done(runs: int, finished: int) -> str:
        return f", {finished} of {runs} already done" if finished else ""
    for cell, (runs, finished) in counts.items():
        print(f"{cell}: {runs} runs{done(runs, finished)}")
    runs, finished = (sum(column) for column in zip(*counts.values())) if counts else (0, 0)
    print(f"{len(counts)} cells, {runs} runs{done(runs, finished)}, into {out}/")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"takes a whole number of seeds ≥ 1, got {text!r}")
    return int(text)


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``frd run``; its parser (``split_run_arguments`` tells its arguments from the overrides)."""
    p = sub.add_parser("run", help="run an experiment file: one cell per combination of its [sweep] axes",
                       usage="frd run EXPERIMENT.toml [run flags] [--FLAG VALUE of its command …]",
                       description="Run the cells of an experiment file (TOML: domain = \"rl\" or \"cls\", any flag "
                                   "of that command as a key, [sweep] axes as lists), then report them. Flags of that "
                                   "command after the file override it (--seeds 5; --grid 5,10 or --sweep KEY=V1,V2 "
                                   "sweeps); experiment.toml records the result.")
    p.add_argument("experiment", metavar="EXPERIMENT.toml", help="the experiment file")
    add_run_flags(p, "results folder (default results/<file name without .toml>; rerun to resume)")
    p.add_argument("--print", action="store_true", help="show the cells, their runs and how many of them --out holds "
                   "finished (a folder the run would refuse is refused); run nothing")
    p.add_argument("--cells", action="append", metavar="GLOB",
                   help="run only the cells whose name matches GLOB (repeatable; e.g. 'channel=asym. TDMA,*' "
                        "for axis channel first): the record stays the whole experiment's, a later run "
                        "without --cells runs the rest, and the report covers every cell that has runs")
    p.add_argument("--seeds-per-pass", type=_positive, metavar="K",
                   help="run every cell's first K seeds, then every cell's next K, …: stopped early, the cells "
                        "have as many runs each (default: a cell's seeds all at once)")
    p.set_defaults(run=_run, overrides=[])
    return p
