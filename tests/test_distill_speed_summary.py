"""The distillation speed benchmark's summary of earlier tables (``--summary``), by hand."""
import pandas as pd

from benchmarks.distill_speed import summary


def test_distill_speed_summary_pools_runs_per_cell():
    table = pd.DataFrame(dict(method=["m"] * 3 + ["n"], partition=["iid"] * 4, seed=[2, 0, 1, 0],
                              old_s=[30.0, 10.0, 20.0, 8.0], new_s=[10.0, 5.0, 5.0, 2.0],
                              speedup=[3.0, 2.0, 4.0, 4.0], old_acc=[80.0, 90.0, 70.0, 50.0],
                              new_acc=[81.0, 92.0, 73.0, 50.0]))
    m, n = summary(table).to_dict("records")
    assert (m["runs"], m["seeds"], m["old_s"], m["new_s"]) == (3, "0-2", 60.0, 20.0)
    assert m["speedup"] == "3.00x (2.00-4.00)"  # 60 / 20 in all, per run 2 to 4
    assert (m["old_acc"], m["new_acc"]) == (80.0, 82.0)
    assert m["acc_change"].startswith("+2.00 [")  # changes 2, 3, 1 (seeds 0, 1, 2)
    assert (n["seeds"], n["acc_change"]) == ("0", "+0.00 [+nan, +nan]")
