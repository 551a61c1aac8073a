"""The benchmarks' tidy repeat CSVs: each measurement appended with its commit, variant and repeat."""
import pandas as pd
import pytest

from benchmarks.tidy import record, select


def test_record_numbers_repeats_per_commit_and_variant(tmp_path):
    path = tmp_path / "throughput.csv"
    table = pd.DataFrame({"lanes": [64, 256], "ratio_cpu": [55.5, 54.2]})
    record(table, path, "quiet", commit="abc1234")
    record(table, path, "quiet", commit="abc1234")
    record(table, path, "busy", commit="abc1234")
    combined = record(table, path, "quiet", commit="def5678")
    assert list(combined.columns) == ["commit", "variant", "repeat", "lanes", "ratio_cpu"]
    assert combined["repeat"].tolist() == [1, 1, 2, 2, 1, 1, 1, 1]
    assert pd.read_csv(path).equals(combined)


def test_a_table_with_its_own_repeat_keeps_it(tmp_path):
    combined = record(pd.DataFrame({"backend": ["local"], "repeat": [0]}), tmp_path / "ray.csv", "quiet", commit="abc1234")
    assert combined[["commit", "variant", "backend", "repeat"]].values.tolist() == [["abc1234", "quiet", "local", 0]]


def test_select_picks_variants_and_refuses_unknown_ones(tmp_path):
    path = tmp_path / "distill_speed.csv"
    for variant in ("grads", "warm"):
        record(pd.DataFrame({"seed": [0, 1]}), path, variant, commit="abc1234")
    assert select(path, ["warm"])["variant"].tolist() == ["warm", "warm"]
    assert len(select(path)) == 4
    with pytest.raises(SystemExit, match="has no variant cold"):
        select(path, ["cold"])
