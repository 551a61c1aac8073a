"""``frd report DIR… [--by AXIS,…] [--metric COLUMN,…] [--out R]``: one summary of experiments
(``frd run``, or a command that swept) and plain results folders, read from their records alone.

Each cell's tables are first rebuilt from its verified parts (``ResultStore.consolidate``: a
damaged run is named and left out), then summarised by its domain as its own command does (the
cell's ``summary.csv`` and figures are redrawn). Each row is compared with the baseline's runs
beside it (RL: ``p_improvement`` against ``independent``, or ``--baseline``; ``across_methods``), and
with ``--pairwise`` every method with every other (``pairwise.csv``). The
cells' summaries, with a column per sweep axis in front, become ``R/summary.csv`` (numbers, but
for names such as ``method``); a table of the domain's headline columns is printed; ``R/figures/``
gets, per axis, those columns against the axis (``<axis>.png`` and ``.pdf``; plain results folders,
which sweep nothing, against the folders: ``experiment.png``), and the domain's curves across cells
(classification: accuracy against cumulative uplink bits). Nothing runs; what is printed names
only what was written.
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from frd.domains import Comparison, Curve, Domain, Metric, add_baseline_flag, check_baseline, domains, get_domain  # noqa: E402
from frd.errors import FrdError  # noqa: E402
from frd.experiment_file import CELLS, RECORD, Experiment, read_file, shown, suggest  # noqa: E402
from frd.frontier import Frontier, frontier_figure, frontier_table  # noqa: E402
from frd.results import ResultStore, atomic_write_csv, atomic_write_text, method_of, save_figure  # noqa: E402
from frd.stats import CI95, IQR, bracketed, improvement_columns  # noqa: E402
from frd.tables import FORMATS, Column, best_row, render, table_format  # noqa: E402

FIGURES = "figures"
MARKERS = "osD^vP*X"


@dataclass(frozen=True)
class Cell:
    """One results folder of a report, and the sweep values it was run with."""

    source: str
    domain: str
    folder: Path
    axes: dict[str, Any]
    method_axes: frozenset[str] = frozenset()
    """The axes that choose its method (``Experiment.method_axes``)."""


def column(axis: str) -> str:
    """A sweep axis's column in ``summary.csv`` (``max-episodes`` → ``max_episodes``)."""
    return axis.replace("-", "_")


def _config_json(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    try:
        return json.loads(path.read_text())["config"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FrdError(f"{path} cannot be read ({type(exc).__name__}: {exc}); it is no frd results folder") from None


def _domain_of(folder: Path) -> str:
    """The domain whose config ``folder/config.json`` holds [our choice: the first that reads it;
    a plain results folder does not name its domain]. A domain refuses another's config with an
    ``FrdError``; anything else it raises is a bug and keeps its traceback."""
    saved = _config_json(folder)
    refusals = []
    for name, domain in domains().items():
        try:
            domain.config_from_dict(saved)
        except FrdError as exc:
            refusals.append(f"{name}: {exc}")
            continue
        return name
    raise FrdError(f"{folder}/config.json is the config of no installed domain ({'; '.join(refusals)})")


def experiment_cells(folder: Path, experiment: Experiment) -> list[Cell]:
    """The cells of ``experiment`` whose record is (or will be) ``folder``, in its order."""
    chooses = frozenset(experiment.method_axes())
    return [Cell(folder.name, experiment.domain, folder / CELLS / cell.id, dict(cell.values), chooses)
            for cell in experiment.cells()]


def cells_of(folder: Path) -> list[Cell]:
    """The cells of an experiment's record (in its order), or a results folder as one cell."""
    if (folder / RECORD).exists():
        return experiment_cells(folder, Experiment.of_record(*read_file(folder / RECORD)))
    if (folder / "config.json").exists():
        return [Cell(folder.name, _domain_of(folder), folder, {})]
    raise FrdError(f"{folder} holds neither an experiment ({RECORD}) nor results (config.json)")


def _started(cell: Cell) -> bool:
    """Whether the cell's folder holds runs (a results folder); if not, it is named on stderr."""
    if not (cell.folder / "config.json").exists():
        print(f"frd: {cell.folder} has no runs yet", file=sys.stderr)
        return False
    return True


def recorded_cells(folder: Path) -> list[Cell] | None:
    """The cells of the experiment record ``folder`` that hold runs, each a results folder (those
    not yet run named); None where ``folder`` is no record. ``frd eval`` and ``frd export`` read
    each cell as the results folder it is."""
    return [cell for cell in cells_of(folder) if _started(cell)] if (folder / RECORD).exists() else None


@dataclass
class Summarised:
    """One cell's summary, its curves and its verified runs (``runs.csv``'s rows of its config)."""

    cell: Cell
    summary: pd.DataFrame
    curves: list[Curve]
    runs: pd.DataFrame


def _summarised(domain: Domain, cell: Cell) -> Summarised | None:
    """A cell's summary and curves from its verified runs; None (named on stderr) if it has none yet."""
    if not _started(cell):
        return None
    config = domain.config_from_dict(_config_json(cell.folder))
    store = ResultStore.existing(cell.folder)
    store.consolidate()  # tables from verified parts only
    runs = store.read("runs")
    if runs.empty:
        print(f"frd: {cell.folder} has no finished runs yet", file=sys.stderr)
        return None
    mine = runs[runs["run_id"].isin(domain.run_ids(config))].reset_index(drop=True)
    return Summarised(cell, domain.summary(config, store), domain.curves(config, store), mine)


Group = tuple[str, tuple[tuple[str, str], ...]]
"""Where methods are compared: an experiment and its values of the axes that do not choose the method."""


def _group(cell: Cell) -> Group:
    kept = sorted((axis, shown(value)) for axis, value in cell.axes.items() if axis not in cell.method_axes)
    return cell.source, tuple(kept)


def _contender(cell: Cell, method: str) -> str:
    """What ``--baseline`` and the pairwise table call a method's runs in a cell: the values of the
    axes that choose its method (a sweep's bundle, ``pd steps``), else the method."""
    return ",".join(shown(value) for axis, value in cell.axes.items() if axis in cell.method_axes) or method


def _planned(domain: Domain, cells: Sequence[tuple[Cell, Any]]) -> dict[Group, list[str]]:
    """The contenders of each group, from the cells' configs alone: what ``--baseline`` may name,
    known before anything is written."""
    groups: dict[Group, list[str]] = {}
    for cell, config in cells:
        for method in sorted({method_of(rid) for rid in domain.run_ids(config)}):
            groups.setdefault(_group(cell), []).append(_contender(cell, method))
    return groups


def check_comparison(domain: Domain, cells: Sequence[tuple[Cell, Any]], baseline: str | None,
                     pairwise: bool = False) -> None:
    """``--baseline`` names a method of these cells (each with its config) and ``--pairwise`` has two
    methods to compare somewhere; one line otherwise, before anything is written."""
    if (baseline is not None or pairwise) and getattr(domain, "comparison", None) is None:
        raise FrdError(f"--{'baseline' if baseline is not None else 'pairwise'}: the {domain.name} domain compares no methods")
    planned = _planned(domain, cells)
    if baseline is not None:
        check_baseline(baseline, (name for names in planned.values() for name in names))
    if pairwise and not any(len(set(names)) > 1 for names in planned.values()):
        raise FrdError("--pairwise: no two methods ran side by side here (in one folder, or in cells that differ "
                       "only in the method)")


def _contenders(cells: Sequence[Summarised]) -> dict[Group, dict[str, pd.DataFrame]]:
    """Per group, each contender's verified runs, in the cells' and their summaries' order."""
    groups: dict[Group, dict[str, pd.DataFrame]] = {}
    for found in cells:
        for method in dict.fromkeys(found.summary["method"]):
            runs = found.runs[found.runs["method"] == method]
            groups.setdefault(_group(found.cell), {})[_contender(found.cell, method)] = runs
    return groups


def _on_shared_seeds(mine: pd.DataFrame, theirs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both runs' frames on the seeds both have: each seed is its own pairing of starts."""
    seeds = set(mine["seed"]) & set(theirs["seed"])
    return mine[mine["seed"].isin(seeds)], theirs[theirs["seed"].isin(seeds)]


def across_methods(comparison: Comparison, cells: Sequence[Summarised], baseline: str | None = None) -> None:
    """Fill ``baseline`` and the columns of ``comparison.measures`` (each with ``_lo``, ``_hi``) in
    every summary row: P(its runs better than the baseline's beside it), over the seeds both have
    (``frd.stats.improvement_columns``). Beside it: the baseline's rows of the same folder (one of
    several methods), else those of the cell with the same experiment and other axis values (a
    sweep over the method). NaN where there is no baseline, and in the baseline's own rows;
    ``baseline`` None: the domain's (``comparison.baseline``)."""
    chosen = baseline or comparison.baseline
    if chosen is None:
        return
    groups = _contenders(cells)
    for found in cells:
        base = groups[_group(found.cell)].get(chosen)
        rows = []
        for method in found.summary["method"]:
            mine = found.runs[found.runs["method"] == method]
            theirs = base if base is not None and _contender(found.cell, method) != chosen else mine.iloc[:0]
            rows.append(improvement_columns(*_on_shared_seeds(mine, theirs), comparison.measures,
                                            comparison.lower_is_better))
        found.summary["baseline"] = chosen
        for name, values in pd.DataFrame(rows, index=found.summary.index).items():
            found.summary[name] = values


def pairwise_table(comparison: Comparison, cells: Sequence[Summarised], front: dict[Group, dict[str, Any]]) -> pd.DataFrame:
    """Every method against every other of its group (``method`` against ``baseline``: P(better) on
    each measure with its 95 % interval, over the seeds both have), behind the group's columns
    (``front``: experiment and other axis values, as in ``summary.csv``)."""
    rows = [{**front[group], "method": name, "baseline": other,
             **improvement_columns(*_on_shared_seeds(mine, theirs), comparison.measures, comparison.lower_is_better)}
            for group, entries in _contenders(cells).items()
            for name, mine in entries.items() for other, theirs in entries.items() if other != name]
    return pd.DataFrame(rows)


def pairwise_text(pairs: pd.DataFrame, comparison: Comparison, keys: Sequence[str]) -> str:
    """``pairwise_table`` printed: per measure that has a value and per group, a matrix of P(the
    row's method better than the column's) [95% CI]."""
    blocks = []
    for measure, name in comparison.measures.items():
        if not pairs[name].notna().any():
            continue
        for values, part in pairs.groupby(list(keys), sort=False, dropna=False) if keys else [((), pairs)]:
            order = list(dict.fromkeys(part["method"]))
            matrix = pd.DataFrame("–", index=pd.Index(order, name="method"), columns=order)
            for _, row in part.iterrows():
                matrix.loc[row["method"], row["baseline"]] = bracketed(row[name], row[f"{name}_lo"], row[f"{name}_hi"],
                                                                       lambda x: f"{x:.2f}")
            where = ", ".join(f"{k}={shown(v)}" for k, v in zip(keys, values if isinstance(values, tuple) else (values,)))
            title = (f"P(a run of the row's method: {comparison.label(measure)} than one of the column's) [{CI95}]"
                     + (f", {where}" if where else ""))
            blocks.append(f"{title}\n{matrix.to_string()}")
    return "\n\n".join(blocks)


def with_axes(summary: pd.DataFrame, cell: Cell, sources: bool) -> pd.DataFrame:
    """The summary (or another frame of the cell's: ``frd eval``'s scores) with the cell's experiment
    (when several are reported) and sweep values in front, an axis whose name the frame has already
    as ``sweep_<axis>`` (``_axis_columns``)."""
    front: dict[str, Any] = {"experiment": cell.source} if sources else {}
    for axis, value in cell.axes.items():
        name = column(axis)
        front[f"sweep_{name}" if name in summary.columns else name] = shown(value) if isinstance(value, list) else value
    return pd.concat([pd.DataFrame({k: [v] * len(summary) for k, v in front.items()}, index=summary.index), summary],
                     axis=1)


def _axis_columns(summary: pd.DataFrame, axes: Sequence[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """Each axis's column: an axis the summary already shows with the same values in every row
    (``method``, ``agents``) is not repeated; one it shows otherwise (classification's
    ``iterations``: a run's total) stays ``sweep_<axis>``."""
    names = {}
    for axis in axes:
        name = column(axis)
        swept = f"sweep_{name}"
        if swept in summary.columns and (summary[swept] == summary[name]).all():
            summary = summary.drop(columns=swept)
        names[axis] = swept if swept in summary.columns else name
    return summary, names


def _metrics(domain: Domain, summary: pd.DataFrame, names: Sequence[str] | None) -> list[Metric]:
    """The headline columns, or those ``--metric`` names (with their interval where the summary has one)."""
    if names is None:
        return [m for m in domain.headline if m.column in summary.columns]
    known = {m.column: m for m in domain.headline}
    metrics = []
    for name in names:
        if name not in summary.columns:
            raise FrdError(f"--metric {name}: no such column in summary.csv{suggest(name, summary.columns)}")
        lo, hi = (f"{name}_lo", f"{name}_hi") if f"{name}_lo" in summary.columns else (None, None)
        # every _lo/_hi pair of a summary is a 95 % bootstrap interval
        metrics.append(known.get(name, Metric(name, name.replace("_", " "), lo, hi, log=name.startswith("bits_"),
                                              interval=CI95 if lo else "")))
    return metrics


def _format(row: pd.Series, metric: Metric) -> str:
    """One cell of the printed table: the value and its interval in brackets (``frd.stats.bracketed``)."""
    def value(name: str | None) -> float:
        number = float(row[name]) if name and pd.notna(row[name]) else np.nan
        return 100 * number if metric.percent else number

    return bracketed(value(metric.column), value(metric.lo), value(metric.hi),
                     (lambda x: format(x, metric.digits)) if metric.digits else None)


def _compared(comparison: Comparison | None, summary: pd.DataFrame) -> list[Metric]:
    """The P(improvement) columns that hold a value, as the table shows them
    (``P(fewer episodes than pd) [95% CI]``): what ``--baseline`` asked."""
    if comparison is None or "baseline" not in summary.columns:
        return []
    baseline = summary["baseline"].dropna().iloc[0] if summary["baseline"].notna().any() else None
    return [Metric(name, f"P({comparison.label(measure)} than {baseline})", f"{name}_lo", f"{name}_hi", plot=False,
                   interval=CI95, digits=".2f", better="higher")
            for measure, name in comparison.measures.items()
            if baseline is not None and name in summary.columns and summary[name].notna().any()]


def _caption(metrics: Sequence[Metric]) -> str:
    """What a paper's table shows, in words a caption can hold: each value with its brackets, what
    the brackets are, and what bold means (``frd.tables.best_row``)."""
    said = [m.label + (f", {m.statistic}" if m.statistic else "") + (f" [{m.interval}]" if m.interval and m.lo else "")
            for m in metrics if m.statistic or (m.interval and m.lo)]
    kinds = sorted({m.interval for m in metrics if m.interval and m.lo})
    meaning = {IQR: "[IQR]: the 25–75 % range of the runs", CI95: "[95% CI]: a 95 % bootstrap interval"}
    text = f"Each row over its runs: {'; '.join(said)}." if said else "Each row over its runs."
    text += "".join(f" {meaning[kind]}." for kind in kinds if kind in meaning)
    marked = [f"{m.better} {m.label}" for m in metrics if m.better and m.lo]
    if marked:
        text += f" Bold: the best of its column ({'; '.join(marked)}), where its interval overlaps no other row's."
    return text


def paper_table(summary: pd.DataFrame, axes: Sequence[str], metrics: Sequence[Metric], form: str) -> str:
    """The printed table as ``form`` (``frd.tables``): the same rows and values, each metric's unit
    under its heading, the best of a column bold where its interval separates it from the rest."""
    names = [c for c in dict.fromkeys(("experiment", *axes, "method")) if c in summary.columns]
    columns = [Column(name, [shown(v) for v in summary[name]]) for name in names]
    for metric in metrics:
        lower = metric.better == "lower"
        best = (best_row(summary[metric.column], summary[metric.lo], summary[metric.hi], lower)
                if metric.better and metric.lo and metric.hi else None)
        columns.append(Column(metric.label, [_format(row, metric) for _, row in summary.iterrows()],
                              metric.unit or ("%" if metric.percent else ""), numeric=True,
                              bold=frozenset() if best is None else frozenset({best})))
    return render(form, columns, _caption(metrics))


def table(summary: pd.DataFrame, axes: Sequence[str], metrics: Sequence[Metric]) -> pd.DataFrame:
    """The printed table: names and sweep values, then each metric formatted, headed by what its
    value and its brackets are (``Metric.heading``: ``median [95% CI]`` or ``median [IQR]``)."""
    names = [c for c in ("experiment", *axes, "method") if c in summary.columns]
    shown_ = summary[list(dict.fromkeys(names))].copy()
    for metric in metrics:
        shown_[metric.heading] = [_format(row, metric) for _, row in summary.iterrows()]
    return shown_


def _save(figure: Figure, stem: Path) -> Path:
    """``stem.png`` (to look at) and ``stem.pdf`` (for papers), written together; returns ``stem``."""
    save_figure(figure, stem.with_suffix(".png"))
    return stem


class _Styles:
    """One colour per method (in the domain's registry order) and one marker per other grouping,
    the same in every figure of a report."""

    def __init__(self, domain: Domain) -> None:
        self.methods = list(domain.methods)
        self.markers: dict[str, str] = {}

    def order(self, method: str) -> int:
        return self.methods.index(method) if method in self.methods else len(self.methods)

    def of(self, method: str, rest: str) -> dict[str, Any]:
        marker = self.markers.setdefault(rest, MARKERS[len(self.markers) % len(MARKERS)])
        return {"color": f"C{self.order(method) % 10}", "marker": marker}


def _series(frame: pd.DataFrame, keys: Sequence[str], styles: _Styles) -> list[tuple[str, dict[str, Any], pd.DataFrame]]:
    """(label, style, rows) per combination of ``keys``' values, methods in registry order."""
    if not keys:
        return [("", styles.of("", ""), frame)]
    groups = []
    for values, rows in frame.groupby(list(keys), sort=False, dropna=False):
        named = dict(zip(keys, values))
        method = str(named.pop("method", ""))
        rest = ", ".join(f"{k}={shown(v)}" for k, v in named.items())
        label = ", ".join(t for t in (method, rest) if t)
        groups.append((styles.order(method), label, styles.of(method, rest), rows))
    groups.sort(key=lambda g: g[0])
    return [(label, style, rows) for _, label, style, rows in groups]


LEGEND_LINE_IN = 0.17
"""Height of one legend entry at font size 8, in inches: a figure with many series grows to hold them."""
TICK_CHARS = 36
"""Characters of category names that fit side by side under one panel; more are slanted."""
NOTE_CHARS = 52
"""Characters of a note at font size 7 that fit across one panel; longer notes are wrapped (one
line running past the panel left constrained layout no room for the panels)."""


def _against_axis(summary: pd.DataFrame, x_name: str, keys: Sequence[str], metrics: Sequence[Metric],
                  styles: _Styles) -> Figure:
    """Each metric against the column ``x_name``: points with their interval, one series per value
    of ``keys`` (method and the other sweep values); payloads on a log axis (a zero cannot be shown
    there, and is named), the rest on a linear axis from zero."""
    numeric = pd.api.types.is_numeric_dtype(summary[x_name]) and not pd.api.types.is_bool_dtype(summary[x_name])
    categories = list(dict.fromkeys(summary[x_name]))
    if x_name == "method":
        categories.sort(key=styles.order)
    series = _series(summary, [k for k in keys if k != x_name], styles)
    height = max(3.8, LEGEND_LINE_IN * len(series) + 0.8)  # the legend beside the panels fits in it
    figure = Figure(figsize=(4.6 * len(metrics) + 2.2, height), layout="constrained")
    for ax, metric in zip(np.atleast_1d(figure.subplots(1, len(metrics))), metrics):
        scale = 100 if metric.percent else 1
        hidden, highest = [], 0.0
        for number, (label, style, rows) in enumerate(series):
            x = rows[x_name].to_numpy(float) if numeric else np.array([categories.index(v) for v in rows[x_name]], float)
            if not numeric and len(series) > 1:
                x = x + 0.08 * (number - (len(series) - 1) / 2)  # side by side, not on top of each other
            y = rows[metric.column].to_numpy(float) * scale
            errors = None
            if metric.lo and metric.hi:
                lo, hi = rows[metric.lo].to_numpy(float) * scale, rows[metric.hi].to_numpy(float) * scale
                errors = np.nan_to_num(np.clip([y - lo, hi - y], 0, None))
            keep = y > 0 if metric.log else np.isfinite(y)
            if metric.log and not keep.all():
                hidden.append(label or "a series")
            if keep.any():
                highest = max(highest, np.nanmax(y[keep] + (0 if errors is None else errors[1][keep])))
                ax.errorbar(x[keep], y[keep], yerr=None if errors is None else errors[:, keep], capsize=3, lw=1,
                            linestyle="-" if numeric else "none", label=label or None, **style)
        if metric.log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(0, 1.08 * highest or 1)  # from zero, the highest point and its interval inside
        if hidden:
            note = "\n".join(textwrap.wrap(f"0, not on a log axis: {', '.join(hidden)}", NOTE_CHARS))
            ax.annotate(note, (0.02, 0.02), xycoords="axes fraction", fontsize=7).set_in_layout(False)
        if numeric:
            ax.set_xticks(sorted(set(summary[x_name].astype(float))))
        else:
            names = [shown(c) for c in categories]
            crowded = sum(map(len, names)) > TICK_CHARS  # names that would run into each other lie slanted
            ax.set_xticks(range(len(categories)), names, rotation=30 if crowded else 0, ha="right" if crowded else "center")
        ax.set(xlabel=x_name.removeprefix("sweep_"), title=metric.heading,
               ylabel=metric.label + (" (%)" if metric.percent and "%" not in metric.label else ""))
        ax.grid(alpha=0.3)
    if any(label for label, _, _ in series):
        figure.legend(*figure.axes[0].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    return figure


def _curve_figure(curves: list[tuple[Cell, Curve]], names: dict[str, str], styles: _Styles) -> Figure:
    """One domain curve across cells: per cell and method a line, its band shaded."""
    first = curves[0][1]
    figure = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = figure.add_subplot()
    several = len({cell.source for cell, _ in curves}) > 1
    frame = pd.concat([curve.frame.assign(**({"experiment": cell.source} if several else {}),
                                          **{names[a]: shown(v) for a, v in cell.axes.items() if names[a] != "method"})
                       for cell, curve in curves], ignore_index=True)
    keys = [c for c in dict.fromkeys(("experiment", "method", *names.values())) if c in frame.columns]
    for label, style, part in _series(frame, keys, styles):
        ax.plot(part["x"], part["y"], label=label, markersize=4, lw=1, **style)
        ax.fill_between(part["x"], part["y_lo"], part["y_hi"], alpha=0.15, color=style["color"])
    if first.xlog:
        ax.set_xscale("log")
    ax.set(xlabel=first.xlabel, ylabel=first.ylabel, title=first.ylabel + " against " + first.xlabel.split(" (")[0])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figure


def report(folders: Sequence[Path], out: Path, by: Sequence[str] | None = None,
           metric_names: Sequence[str] | None = None, frontier_per: Sequence[str] = (),
           baseline: str | None = None, pairwise: bool = False, table_form: str | None = None) -> pd.DataFrame:
    """Summarise ``folders`` into ``out`` (``summary.csv``, ``figures/``), print the table, return
    the numeric summary; the domain's frontiers with one front per value of ``frontier_per``'s axes;
    P(improvement) against ``baseline`` (default the domain's), with ``pairwise`` every method
    against every other (``pairwise.csv``, printed), with ``table_form`` the table for a paper
    (``summary.tex`` or ``summary.md``: ``frd.tables``)."""
    if table_form is not None:
        table_format(table_form)  # before anything is read or written
    cells = [cell for folder in folders for cell in cells_of(Path(folder))]
    kinds = sorted({cell.domain for cell in cells})
    if len(kinds) > 1:
        raise FrdError(f"one domain per report: these folders hold {' and '.join(kinds)}")
    domain = get_domain(kinds[0])
    axes = list(dict.fromkeys(axis for cell in cells for axis in cell.axes))
    chosen = _chosen_axes(by, axes)
    within = _chosen_axes(frontier_per, axes, "--frontier-per") if frontier_per else []
    sources = len({cell.source for cell in cells}) > 1
    check_comparison(domain, [(cell, domain.config_from_dict(_config_json(cell.folder))) for cell in cells
                              if (cell.folder / "config.json").exists()], baseline, pairwise)
    summarised = [found for found in (_summarised(domain, cell) for cell in cells) if found is not None]
    if not summarised:
        raise FrdError(f"no finished runs in {', '.join(map(str, folders))} yet")
    comparison = getattr(domain, "comparison", None)
    if comparison is not None:
        across_methods(comparison, summarised, baseline)
    frames = [with_axes(found.summary, found.cell, sources) for found in summarised]
    curves = [(found.cell, curve) for found in summarised for curve in found.curves]
    summary, names = _axis_columns(pd.concat(frames, ignore_index=True), axes)
    metrics = _metrics(domain, summary, metric_names)
    if metric_names is None:
        metrics += _compared(comparison, summary)
    if by:  # numbers in order, names in the order the experiment lists them
        def rank(values: pd.Series) -> pd.Series:
            return values if pd.api.types.is_numeric_dtype(values) else values.map(list(dict.fromkeys(values)).index)
        summary = summary.sort_values([names[a] for a in chosen], key=rank, kind="stable",
                                      na_position="last").reset_index(drop=True)
    atomic_write_csv(summary, out / "summary.csv")
    written = ["summary.csv"]
    shown_axes = [names[a] for a in dict.fromkeys([*chosen, *axes])]
    if table_form is not None:
        paper = out / f"summary{FORMATS[table_form]}"
        atomic_write_text(paper, paper_table(summary, shown_axes, metrics, table_form))
        written.append(paper.name)
    with pd.option_context("display.width", 250, "display.max_columns", None, "display.max_colwidth", 60):
        print(table(summary, shown_axes, metrics).to_string(index=False))
        if pairwise and comparison is not None:
            front = {_group(found.cell): {**({"experiment": found.cell.source} if sources else {}),
                                          **{names[a]: v for a, v in found.cell.axes.items() if a not in found.cell.method_axes}}
                     for found in summarised}
            pairs = pairwise_table(comparison, summarised, front)
            atomic_write_csv(pairs, out / "pairwise.csv")
            written.append("pairwise.csv")
            group_keys = [c for c in pairs.columns if c in {k for f in front.values() for k in f}]
            print(f"\n{pairwise_text(pairs, comparison, group_keys)}")
    styles = _Styles(domain)
    plotted = [m for m in metrics if m.plot]
    keys = [c for c in dict.fromkeys(("experiment", "method", *names.values())) if c in summary.columns]
    # plain results folders sweep nothing: their headline is drawn against the folders
    against = {column(axis): names[axis] for axis in chosen} or ({"experiment": "experiment"} if sources else {})
    drawn = [_save(_against_axis(summary, x_name, keys, plotted, styles), out / FIGURES / stem)
             for stem, x_name in against.items()
             if plotted and summary[x_name].nunique(dropna=False) > 1]  # one value: nothing to draw against
    for name in dict.fromkeys(curve.name for _, curve in curves):
        drawn.append(_save(_curve_figure([(c, k) for c, k in curves if k.name == name], names, styles), out / FIGURES / name))
    frontiers: Sequence[Frontier] = getattr(domain, "frontiers", ())
    per = [names[a] for a in within]

    def series(rows: pd.DataFrame) -> list[tuple[str, dict[str, Any], pd.DataFrame]]:
        return _series(rows, [k for k in keys if k not in per], styles)
    for frontier in frontiers:
        if len(summary) > 1 and {frontier.cost, frontier.outcome} <= set(summary.columns):
            points = frontier_table(summary, frontier, keys, per)
            atomic_write_csv(points, out / f"{frontier.name}.csv")
            drawn.append(_save(frontier_figure(points, frontier, series, per), out / FIGURES / frontier.name))
    written += [f"{FIGURES}/"] if drawn else []
    print(f"\n{', '.join(written[:-1])}{' and ' if len(written) > 1 else ''}{written[-1]} in {out}/")
    return summary


def _chosen_axes(by: Sequence[str] | None, axes: Sequence[str], flag: str = "--by") -> list[str]:
    if by is None:
        return list(axes)
    chosen = []
    for name in by:
        axis = name.replace("_", "-")
        if axis not in axes:
            known = ", ".join(axes) if axes else "none: these folders sweep nothing"
            raise FrdError(f"{flag} {name}: not a sweep axis here (axes: {known}){suggest(axis, axes)}")
        chosen.append(axis)
    return chosen


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def _run(args: argparse.Namespace) -> int:
    if args.out is None and len(args.folders) > 1:
        raise FrdError("reporting several folders needs --out R: where summary.csv and figures/ go")
    out = Path(args.out or args.folders[0])
    report([Path(f) for f in args.folders], out, _names(args.by), _names(args.metric), _names(args.frontier_per) or (),
           args.baseline, args.pairwise, args.table)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summary.csv, the table and figures of experiments or results folders; runs nothing",
                       description="The summary of experiments (frd run, or a command that swept) and results "
                                   "folders from their verified runs: summary.csv (numbers, a column per sweep axis), "
                                   "the printed table, and figures per axis (PNG and PDF). Nothing runs.")
    p.add_argument("folders", nargs="+", metavar="DIR", help="an experiment (frd run's --out) or a results folder")
    p.add_argument("--by", metavar="AXIS,…", help="sweep axes to order the table by and to draw against (default every axis)")
    p.add_argument("--metric", metavar="COLUMN,…", help="summary.csv columns to show and draw (default the domain's headline)")
    p.add_argument("--frontier-per", metavar="AXIS,…", help="one Pareto front (and panel of figures/frontier*) per "
                   "value of these sweep axes, e.g. agents (default one front over every row)")
    p.add_argument("--out", metavar="R", help="folder of summary.csv and figures/ (default DIR, when one is given)")
    add_baseline_flag(p, "the domain's: RL independent, classification none")
    p.add_argument("--pairwise", action="store_true", help="also every method against every other of the same "
                   "folder or other sweep values: P(better) [95%% CI], printed and in pairwise.csv")
    p.add_argument("--table", metavar="|".join(FORMATS), help="also the table for a paper: booktabs LaTeX "
                   "(R/summary.tex) or Markdown (R/summary.md), units under the headings, intervals named in the "
                   "caption, a column's best in bold where its interval overlaps no other row's")
    p.set_defaults(run=_run)

