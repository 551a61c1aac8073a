"""Bad input gets one clear line and exit code 2, never a traceback; good input a table."""
import pytest

from frd.cli import main

OUT = ["--out"]


@pytest.mark.parametrize("args, message", [
    (["rl", "--method", "dqn"], "unknown RL method 'dqn'"),
    (["rl", "--agents", "0"], "--agents must be at least 1"),
    (["rl", "--agents", "-3"], "--agents must be at least 1"),
    (["rl", "--seeds", "0"], "--seeds must be at least 1"),
    (["rl", "--env", "NoSuchEnv-v9"], "unknown gymnasium env 'NoSuchEnv-v9'"),
    (["rl", "--env", "Pendulum-v1"], "Discrete action space"),
    (["rl", "--env", "FrozenLake-v1"], "Box observation space"),
    (["rl", "--method", "frd", "--proxy-layout", "zip"], "argument --proxy-layout/--codec: expected paper|compact, got 'zip'"),
    (["rl", "--recipe", "ppo"], "argument --recipe: invalid choice: 'ppo'"),
    (["rl", "--channel", "carrier-pigeon"], "argument --channel: invalid choice: 'carrier-pigeon'"),
    (["compare", "--methods", "frd,magic"], "unknown RL method 'magic'"),
    (["rl", "--method", "frd", "--env", "MountainCar-v0", "--grid", "0"], "--grid must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    assert main(args + OUT + [str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_argparse_errors_are_one_line_too(capsys):
    assert main(["rl", "--agents", "two", "--out", "x"]) == 2
    assert "invalid int value" in capsys.readouterr().err


def test_out_folder_of_another_experiment_is_refused(tmp_path, capsys):
    base = ["rl", "--seeds", "1", "--max-episodes", "3", "--hidden", "8", "--no-progress", "--out", str(tmp_path)]
    assert main(base) == 0
    assert main(base[:-2] + ["--hidden", "16", "--out", str(tmp_path)]) == 2
    assert "different experiment" in capsys.readouterr().err


def test_compare_prints_a_table_per_method(tmp_path, capsys):
    assert main(["compare", "--methods", "frd,independent", "--seeds", "2", "--max-episodes", "5",
                 "--period", "2", "--hidden", "8", "--no-progress", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "== frd (2 agents, 2 runs) ==" in out and "== independent (2 agents, 2 runs) ==" in out
    assert "bits up/agent/round" in out


def test_kill_stops_a_run_like_ctrl_c(tmp_path, monkeypatch):
    import signal

    import frd.cli as cli

    def killed(config, out_dir, progress=True, **backend):
        signal.raise_signal(signal.SIGTERM)  # what `kill` sends, mid-experiment

    monkeypatch.setattr("frd.rl.cli.run_experiment", killed)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert main(["rl", "--seeds", "1", "--out", str(tmp_path)]) == 130  # handled, not a crash
        assert signal.getsignal(signal.SIGTERM) is cli._stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_single_agent_reference_adds_a_one_agent_row(tmp_path, capsys):
    assert main(["compare", "--methods", "frl,independent", "--seeds", "2", "--max-episodes", "4", "--period", "2",
                 "--hidden", "8", "--single-agent-reference", "--no-progress", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "== independent (1 agents, 2 runs) ==" in out and "== independent (2 agents, 2 runs) ==" in out
    assert (tmp_path / "single-agent" / "runs.csv").exists()
