"""Does the sharing study's answer survive other float bits? Its summary against a replication's.

    python -m benchmarks.sharing_replication [--original benchmarks/results]
                                             [--replication benchmarks/results/sharing_replication]

Both folders hold a ``sharing_summary.csv`` written by ``benchmarks.sharing_study`` (the
replication: the same cells and seeds run again with another engine or on another machine, so
every trajectory differs after a few hundred episodes). For each variant of each cell both
summaries hold, and each measure (first agent, every agent), the verdict (helps / hurts when
the CI of P(fewer episodes than independent) excludes 0.5, else –) is read in both. Written into
the replication folder: ``replication.csv`` (one row per variant and measure: both P [CI], both
verdicts), ``replication.md`` (how many verdicts held, and what each original verdict became)
and ``replication.png`` (replicated P against the original, with both CIs).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.sharing_study import MEASURES, interval_verdict  # noqa: E402
from frd.rl.summary import BASELINE  # noqa: E402

CELL = ["env", "agents", "population", "variant"]
VERDICT_COLOURS = {"helps": "tab:green", "hurts": "tab:red", "–": "grey"}
STRENGTHS = ((0.35, "P ≤ 0.15 or ≥ 0.85"), (0.2, "P 0.15–0.3 or 0.7–0.85"), (0.0, "P 0.3–0.7"))
"""Bins of an original verdict's distance |P − 0.5| from no effect (lower bound, label)."""


def compare(original: pd.DataFrame, replication: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, variant, measure) that both summaries hold: P [lo, hi] and verdict of each."""
    both = original.merge(replication, on=CELL, suffixes=(" original", " replication"))
    both = both[both["variant"] != BASELINE]
    rows = []
    for _, r in both.iterrows():
        for name in MEASURES.values():
            row = {c: r[c] for c in CELL} | {"measure": name}
            for side in ("original", "replication"):
                lo, hi = r[f"{name} P lo {side}"], r[f"{name} P hi {side}"]
                row |= {f"P {side}": r[f"{name} P(better) {side}"], f"lo {side}": lo, f"hi {side}": hi,
                        f"verdict {side}": interval_verdict(lo, hi)}
            rows.append(row)
    return pd.DataFrame(rows)


def report(pairs: pd.DataFrame) -> str:
    """How many verdicts held, then each original verdict's fate, then the changed rows."""
    held = pairs["verdict original"] == pairs["verdict replication"]
    lines = [f"{int(held.sum())} of {len(pairs)} verdicts the same.", "",
             "| original | replication | count |", "|---|---|---|"]
    fates = pairs.groupby(["verdict original", "verdict replication"]).size()
    lines += [f"| {was} | {now} | {count} |" for (was, now), count in fates.items()]
    lines += ["", "Original helps / hurts by their distance from no effect:", "",
              "| original P | verdicts | held |", "|---|---|---|"]
    verdicts = pairs[pairs["verdict original"] != "–"]
    distance = (verdicts["P original"] - 0.5).abs()
    upper = 1.0
    for lower, label in STRENGTHS:
        group = verdicts[(distance >= lower) & (distance < upper)]
        upper = lower
        kept = int((group["verdict original"] == group["verdict replication"]).sum())
        lines.append(f"| {label} | {len(group)} | {kept} |")
    lines += ["", "Changed:", "", "| env | agents | population | variant | measure | original P [CI] | "
              "replication P [CI] |", "|---" * 7 + "|"]
    for _, r in pairs[~held].iterrows():
        sides = [f"{r[f'P {s}']:.2f} [{r[f'lo {s}']:.2f}–{r[f'hi {s}']:.2f}] {r[f'verdict {s}']}"
                 for s in ("original", "replication")]
        lines.append("| " + " | ".join([r["env"], str(r["agents"]), r["population"], r["variant"], r["measure"], *sides])
                     + " |")
    return "\n".join(lines) + "\n"


def plot(pairs: pd.DataFrame, path: Path) -> None:
    """Replicated P against the original, one panel per measure, coloured by the original verdict:
    a verdict held where its point stays on the same side of 0.5 with its interval clear of it."""
    fig, axes = plt.subplots(1, len(MEASURES), figsize=(5.5 * len(MEASURES), 5.2), squeeze=False)
    for ax, name in zip(axes[0], MEASURES.values()):
        measure = pairs[pairs["measure"] == name]
        for was, g in measure.groupby("verdict original"):
            ax.errorbar(g["P original"], g["P replication"],
                        xerr=[g["P original"] - g["lo original"], g["hi original"] - g["P original"]],
                        yerr=[g["P replication"] - g["lo replication"], g["hi replication"] - g["P replication"]],
                        fmt="o", ms=4, capsize=1.5, elinewidth=0.6, alpha=0.3 if was == "–" else 0.85,
                        color=VERDICT_COLOURS[was], label=f"original: {was} ({len(g)})")
        ax.plot([0, 1], [0, 1], color="black", lw=0.8)
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.axvline(0.5, color="grey", lw=0.8, ls="--")
        held = int((measure["verdict original"] == measure["verdict replication"]).sum())
        ax.set(xlim=(0, 1), ylim=(0, 1), aspect="equal",
               title=f"{name}: P(sooner than alone)\n{held} of {len(measure)} verdicts held",
               xlabel="original study", ylabel="replication")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--original", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--replication", type=Path, default=Path("benchmarks/results/sharing_replication"))
    args = parser.parse_args(argv)
    summaries = [args.original / "sharing_summary.csv", args.replication / "sharing_summary.csv"]
    for path in summaries:
        if not path.is_file():
            raise SystemExit(f"sharing_replication: no {path} (python -m benchmarks.sharing_study writes it)")
    pairs = compare(*(pd.read_csv(path) for path in summaries))
    if pairs.empty:
        raise SystemExit("sharing_replication: the two summaries share no cell")
    pairs.to_csv(args.replication / "replication.csv", index=False)
    text = report(pairs)
    (args.replication / "replication.md").write_text(text)
    plot(pairs, args.replication / "replication.png")
    print(text)
    return pairs


if __name__ == "__main__":
    main()
