"""The Python API: ``import frd`` is light and lists its surface; ``frd.rl.run`` and
``frd.classification.run`` return numeric summaries, also saved as ``summary.csv``; the summaries'
figures by hand."""
from __future__ import annotations

import pydoc
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest

import frd
from frd.classification.methods import CLS_METHODS
from frd.classification.report import cls_summary, cls_table
from frd.rl.methods import RL_METHODS
from frd.rl.summary import rl_summary, rl_table

RL_COLUMNS = ["method", "agents", "runs", "completed_frac", "all_agents_completed_frac", "mission_episodes_median",
              "mission_episodes_q25", "mission_episodes_q75", "mission_episodes_median_lo", "mission_episodes_median_hi",
              "mission_episodes_iqm", "mission_episodes_iqm_lo", "mission_episodes_iqm_hi", "baseline", "p_improvement",
              "p_improvement_lo", "p_improvement_hi", "p_improvement_all_agents", "p_improvement_all_agents_lo",
              "p_improvement_all_agents_hi", "p_improvement_sim_s", "p_improvement_sim_s_lo", "p_improvement_sim_s_hi",
              "all_agents_episodes_iqm", "all_agents_episodes_iqm_lo",
              "all_agents_episodes_iqm_hi", "slowest_agent_episodes", "median_agent_episodes", "env_steps", "rounds",
              "mission_sim_s_median", "mission_sim_s_median_lo", "mission_sim_s_median_hi", "mission_sim_s_iqm",
              "mission_sim_s_iqm_lo", "mission_sim_s_iqm_hi", "cpu_seconds", "comm_seconds", "bits_up_per_agent_round",
              "bits_down_per_agent_round", "bits_up_total",
              "bits_down_total", "bits_per_agent_total"]
CLS_COLUMNS = ["method", "dataset", "partition", "runs", "parameters", "iterations", "accuracy_final_median",
               "accuracy_final_q25", "accuracy_final_q75", "accuracy_final_median_lo", "accuracy_final_median_hi",
               "accuracy_final_iqm", "accuracy_final_iqm_lo", "accuracy_final_iqm_hi", "accuracy_best_median",
               "accuracy_best_q25", "accuracy_best_q75", "accuracy_best_median_lo", "accuracy_best_median_hi",
               "accuracy_best_iqm", "accuracy_best_iqm_lo", "accuracy_best_iqm_hi", "best_round_median", "best_round_q25",
               "best_round_q75", "accuracy_after_local_median", "accuracy_after_local_median_lo",
               "accuracy_after_local_median_hi", "accuracy_global_median", "baseline", "p_improvement", "p_improvement_lo",
               "p_improvement_hi", "bits_up_per_device_round",
               "bits_down_per_device_round", "bits_up_total", "bits_down_total", "compute_seconds", "comm_seconds",
               "sim_seconds", "time_to_85_median", "time_to_85_reached", "time_to_90_median", "time_to_90_reached"]


def _numeric(summary: pd.DataFrame, text: list[str]) -> None:
    for column in summary.columns:
        assert (column in text) != pd.api.types.is_numeric_dtype(summary[column]), column


@pytest.mark.processes
def test_import_frd_is_light_and_lists_its_surface():
    code = ("import sys, frd; heavy = [m for m in ('torch', 'numba', 'pandas', 'matplotlib', 'frd.rl', "
            "'frd.classification') if m in sys.modules]; print(heavy, dir(frd))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("[] ['ClsConfig', 'FrdError', 'RLConfig', '__version__', 'classification', 'cls_config', "
                           "'cls_configs', 'rl', 'rl_config']")
    assert frd.rl_config is frd.rl.config.rl_config and frd.FrdError is frd.errors.FrdError
    assert frd.cls_config("fd").method == "fd" and isinstance(frd.cls_config("fd"), frd.ClsConfig)
    with pytest.raises(AttributeError, match="module 'frd' has no attribute 'summarize'"):
        getattr(frd, "summarize")  # noqa: B009  (the attribute access is the test)


@pytest.mark.parametrize("builder, config, registry, examples", [
    ("rl_config", "RLConfig", RL_METHODS, ["max_episodes = 2000", "Episode cap per agent", "grid = 30  [frd, mixfrd]"]),
    ("cls_config", "ClsConfig", CLS_METHODS, ["iterations_per_round = 100", "beta = 0.01  [fd]"]),
    ("cls_configs", "ClsConfig", CLS_METHODS, ["n_mix = 50  [fld, mixfld, mix2fld]"]),
])
def test_help_of_a_config_builder_lists_every_option_and_every_method_s(builder, config, registry, examples):
    text = pydoc.render_doc(getattr(frd, builder), renderer=pydoc.plaintext)
    assert all(example in text for example in examples), text
    names = [f.name for f in fields(getattr(frd, config)) if f.name not in ("method", "methods", "options")]
    names += [f.name for method in registry.values() for f in fields(method.Options)]
    assert [name for name in names if f"\n    {name} = " not in text] == []


def test_rl_config_takes_methods_as_one_comma_separated_text():
    assert frd.rl_config("frd, independent").methods == ("frd", "independent")
    assert isinstance(frd.rl_config(("pd",)), frd.RLConfig)
    with pytest.raises(frd.FrdError, match="unknown RL method 'magic'"):
        frd.rl_config("frd,magic")


def test_rl_run_returns_the_numeric_summary_it_saves(tmp_path):
    config = frd.rl_config("frd,independent", agents=2, seeds=2, max_episodes=6, period=2, hidden=8)
    summary = frd.rl.run(config, out=tmp_path)
    assert list(summary.columns) == RL_COLUMNS and list(summary["method"]) == ["frd", "independent"]
    _numeric(summary, ["method", "baseline"])
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "summary.csv"), summary, check_dtype=False)
    runs = pd.read_csv(tmp_path / "runs.csv")
    frd_runs = runs[runs["method"] == "frd"]
    row = summary.iloc[0]
    assert row["bits_up_total"] == frd_runs["bits_up"].median() > 0
    assert row["bits_up_per_agent_round"] == (frd_runs["bits_up"] / frd_runs["rounds"] / 2).median()
    assert np.isnan(summary.iloc[1]["p_improvement"]) and summary.iloc[1]["bits_up_total"] == 0
    with pytest.raises(frd.FrdError, match="different experiment"):
        frd.rl.run(frd.rl_config("frd", agents=3, seeds=1, max_episodes=6, period=2, hidden=8), out=tmp_path)


def test_classification_run_returns_the_numeric_summary_it_saves(tmp_path):
    configs = frd.cls_configs("fd,fl", rounds=2, iterations_per_round=2, devices=3, seeds=2)
    assert [c.method for c in configs] == ["fd", "fl"] and configs[0].options.beta == 0.01
    summary = frd.classification.run(configs, out=tmp_path)
    assert list(summary.columns) == CLS_COLUMNS and list(summary["method"]) == ["fd", "fl"], "in the order asked for"
    _numeric(summary, ["method", "dataset", "partition"])
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "summary.csv"), summary, check_dtype=False)
    row = summary.iloc[0]
    assert row["bits_up_per_device_round"] == 3200 and row["bits_up_total"] == 2 * 3 * 3200  # 10 logits × 10 labels × 32 bits
    assert np.isnan(row["accuracy_global_median"]) and 0 <= row["accuracy_final_median"] <= 1
    assert row["accuracy_final_iqm_lo"] <= row["accuracy_final_iqm"] <= row["accuracy_final_iqm_hi"], "2 seeds: an interval"
    assert summary.iloc[1]["accuracy_global_median"] >= 0, "FL has a global model"


def test_rl_summary_by_hand():
    runs = pd.DataFrame({
        "method": ["frd"] * 4 + ["independent"] * 4, "n_agents": 2, "completed": [True, True, True, False] + [True] * 4,
        "mission_episodes": [10, 20, 30, 40, 50, 60, 70, 80], "all_agents_episodes": np.nan,
        "median_agent_episodes": np.nan, "mission_env_steps": [100, 200, 300, 400, 1, 2, 3, 4],
        "rounds": [2, 4, 6, 0, 2, 2, 2, 2], "bits_up": [400, 800, 1200, 0, 0, 0, 0, 0],
        "bits_down": [800, 1600, 2400, 0, 0, 0, 0, 0], "compute_s": 1.0, "comm_s": 0.5})
    frd_row, alone = rl_summary(runs).to_dict("records")
    assert frd_row["completed_frac"] == 0.75 and frd_row["mission_episodes_median"] == 25
    assert (frd_row["mission_episodes_q25"], frd_row["mission_episodes_q75"]) == (17.5, 32.5)
    assert frd_row["mission_episodes_iqm"] == 25 and frd_row["p_improvement"] == 1.0  # every frd run beats every one alone
    assert frd_row["bits_up_per_agent_round"] == 100, "400 bits / 2 rounds / 2 agents; a run of 0 rounds left out"
    assert frd_row["bits_up_total"] == 600 and frd_row["env_steps"] == 250 and frd_row["cpu_seconds"] == 1.0
    assert np.isnan(frd_row["slowest_agent_episodes"]) and np.isnan(alone["p_improvement"])


def test_cls_summary_by_hand():
    runs = pd.DataFrame({"run_id": ["fl-seed0", "fl-seed1"], "method": "fl", "dataset": "digits", "partition": "iid",
                         "parameters": 10, "iterations": 4, "accuracy": [0.6, 0.8], "local_accuracy": [0.5, 0.7],
                         "global_accuracy": [0.6, 0.8], "bits_up": [640, 640], "bits_down": [640, 640],
                         "compute_s": [1.0, 3.0], "comm_s": 0.0})
    # device 0 after each download: seed 0 0.7 then 0.6 (best 0.7, round 1), seed 1 0.5 then 0.8 (best 0.8, round 2)
    rounds = pd.DataFrame({"run_id": ["fl-seed0"] * 3 + ["fl-seed1"] * 3, "round": [1, 2, 2] * 2,
                           "phase": ["exchanged", "exchanged", "local"] * 2, "device": 0,
                           "accuracy": [0.7, 0.6, 0.9, 0.5, 0.8, 0.9]})
    ledger = pd.DataFrame({"run_id": "fl-seed0", "round": [0, 1, 1], "direction": ["down", "up", "down"],
                           "bits": [999, 320, 160]})
    row = cls_summary(runs, rounds, ledger).iloc[0]
    assert row["accuracy_final_median"] == pytest.approx(0.7) and row["accuracy_after_local_median"] == pytest.approx(0.6)
    assert row["accuracy_final_iqm"] == pytest.approx(0.7) and row["runs"] == 2  # 2 values: none is cut
    assert row["accuracy_best_median"] == pytest.approx(0.75) and row["accuracy_best_iqm"] == pytest.approx(0.75)
    assert (row["accuracy_best_median_lo"], row["accuracy_best_median_hi"]) == pytest.approx((0.7, 0.8)), "medians of 2 draws"
    assert (row["best_round_q25"], row["best_round_median"], row["best_round_q75"]) == (1, 1, 2), "rounds a seed had"
    assert (row["accuracy_after_local_median_lo"], row["accuracy_after_local_median_hi"]) == pytest.approx((0.5, 0.7))
    assert row["bits_up_per_device_round"] == 320 and row["bits_down_per_device_round"] == 160, "round 0 left out"
    assert row["compute_seconds"] == 2.0 and row["accuracy_global_median"] == pytest.approx(0.7)


def test_cls_summary_best_round_of_the_global_model_where_devices_keep_none():
    """FedDualMatch-like: only the global model is evaluated. Round 0 and the local phase are not
    rounds after a download; a tie goes to the first round."""
    ids = [f"feddualmatch-seed{s}" for s in range(3)]
    runs = pd.DataFrame({"run_id": ids, "method": "feddualmatch", "dataset": "digits", "partition": "iid",
                         "parameters": 10, "iterations": 4, "accuracy": np.nan, "local_accuracy": np.nan,
                         "global_accuracy": [0.6, 0.5, 0.7], "bits_up": 1, "bits_down": 1, "compute_s": 1.0, "comm_s": 0.0})
    curves = {ids[0]: [0.5, 0.9, 0.9, 0.6], ids[1]: [0.8, 0.7, 0.6, 0.5], ids[2]: [0.4, 0.5, 0.6, 0.7]}
    after = [{"run_id": rid, "round": r + 1, "phase": "exchanged", "device": -1, "accuracy": a}
             for rid, curve in curves.items() for r, a in enumerate(curve)]
    ignored = [{"run_id": ids[1], "round": 0, "phase": "exchanged", "device": -1, "accuracy": 0.95},
               {"run_id": ids[2], "round": 2, "phase": "local", "device": -1, "accuracy": 1.0}]
    rounds = pd.DataFrame(ignored + after)
    ledger = pd.DataFrame({"run_id": ids[0], "round": [1], "direction": ["up"], "bits": [8]})
    summary = cls_summary(runs, rounds, ledger)
    row = summary.iloc[0]
    assert cls_table(summary).iloc[0]["best acc %, median (round)"] == "80 (2)", "medians over seeds, in %"
    # bests 0.9 (round 2, tied with 3), 0.8 (round 1), 0.7 (round 4)
    assert (row["accuracy_best_q25"], row["accuracy_best_median"], row["accuracy_best_q75"]) == pytest.approx((0.75, 0.8, 0.85))
    assert row["accuracy_best_iqm"] == pytest.approx(0.8), "3 values: ⌊3/4⌋ = 0 cut from each end"
    assert (row["best_round_q25"], row["best_round_median"], row["best_round_q75"]) == (1, 2, 4)  # nearest ranks of 1, 2, 4
    assert np.isnan(row["accuracy_final_median"]) and row["accuracy_global_median"] == pytest.approx(0.6)
    assert np.isnan(row["accuracy_after_local_median"]) and np.isnan(row["accuracy_after_local_median_lo"])


def test_printed_tables_name_what_their_brackets_hold():
    """The 25–75 % range of the runs is [IQR], an interval of a statistic [95% CI]: the same
    ``330 [311–350]`` meant either before, by table."""
    runs = pd.DataFrame({"method": "frd", "n_agents": 2, "completed": True, "mission_episodes": [10, 20, 30, 40],
                         "all_agents_episodes": np.nan, "median_agent_episodes": np.nan, "mission_env_steps": 1,
                         "rounds": 1, "bits_up": 8, "bits_down": 8, "compute_s": 1.0, "comm_s": 0.0})
    summary = rl_summary(runs)
    row = rl_table(summary).iloc[0]
    assert row["mission episodes, median [IQR]"] == "25 [17.5–32.5]"  # numpy's quartiles of 10, 20, 30, 40
    lo, hi = summary.iloc[0][["mission_episodes_median_lo", "mission_episodes_median_hi"]]
    assert row["mission episodes, median [95% CI]"] == f"25 [{lo:.3g}–{hi:.3g}]" and (lo, hi) != (17.5, 32.5)
    assert row["mission episodes, IQM [95% CI]"].startswith("25 [")
    assert "mission episodes" not in rl_table(summary).columns, "no bracket left unnamed"
    cls = pd.DataFrame({"method": ["fl"], "dataset": "digits", "partition": "iid", "runs": 3, "parameters": 1,
                        "iterations": 1, "accuracy_final_median": 0.5, "accuracy_final_q25": 0.25,
                        "accuracy_final_q75": 0.75, "accuracy_best_median": 0.9, "best_round_median": 3.0,
                        "accuracy_after_local_median": np.nan, "accuracy_global_median": np.nan,
                        "bits_up_per_device_round": 1, "bits_down_per_device_round": 1, "bits_up_total": 1,
                        "bits_down_total": 1, "compute_seconds": 1, "comm_seconds": 0})
    shown = cls_table(cls).iloc[0]
    assert shown["device acc %, median [IQR]"] == "50 [25–75]" and shown["best acc %, median (round)"] == "90 (3)"
