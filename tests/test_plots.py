"""The learning curve is the run's progress towards the mission: its best agent, held once stopped."""
import numpy as np
import pandas as pd

from frd.rl.plots import _learning_curves, plot_mission, plot_payload


def _episodes():
    rows = [("r0", "m", 0, 0, e, 500.0) for e in range(1, 11)]          # agent 0 completes at 10
    rows += [("r0", "m", 0, 1, e, 10.0) for e in range(1, 13)]          # agent 1 plays 12 episodes
    rows += [("r1", "m", 1, a, e, 20.0 * e) for a in (0, 1) for e in range(1, 4)]
    return pd.DataFrame(rows, columns=["run_id", "method", "seed", "agent", "episode", "score"])


def test_learning_curve_is_best_agent_mean_held_after_the_run_stops():
    curves = _learning_curves(_episodes(), window=10)["m"]
    assert curves.shape == (2, 12)
    np.testing.assert_allclose(curves[0, [0, 9, 11]], [500, 500, 500])
    np.testing.assert_allclose(curves[1, :3], [20, 30, 40])   # rolling means of 20, 40, 60
    assert np.all(curves[1, 3:] == 40)                        # held after its third episode


def test_figures_are_written(tmp_path):
    runs = pd.DataFrame({"run_id": ["r0", "r1"], "method": "m", "seed": [0, 1], "n_agents": 2,
                         "completed": [True, False], "mission_episodes": [10, 3], "rounds": [2, 1],
                         "bits_up": [100, 50], "bits_down": [200, 100]})
    plot_mission(_episodes(), runs, tmp_path / "mission.png")
    plot_payload(runs, tmp_path / "payload.png")
    assert (tmp_path / "mission.png").stat().st_size > 0 and (tmp_path / "payload.png").stat().st_size > 0
