"""The learning curve is the run's progress towards the mission: its best agent, held once stopped."""
import numpy as np
import pandas as pd

from frd.rl.plots import _learning_curves, method_order, mission_figure, payload_figure, plot_mission, plot_payload


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


def test_figures_are_written_as_png_and_pdf(tmp_path):
    runs = pd.DataFrame({"run_id": ["r0", "r1"], "method": "m", "seed": [0, 1], "n_agents": 2,
                         "completed": [True, False], "mission_episodes": [10, 3], "rounds": [2, 1],
                         "bits_up": [100, 50], "bits_down": [200, 100]})
    plot_mission(_episodes(), runs, tmp_path / "mission.png")
    plot_payload(runs, tmp_path / "payload.png")
    assert {p.name for p in tmp_path.iterdir()} == {"mission.png", "mission.pdf", "payload.png", "payload.pdf"}
    for name in ("mission", "payload"):  # for papers: the PDF beside the PNG, the same figure
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")
        assert (tmp_path / f"{name}.pdf").read_bytes().startswith(b"%PDF")


def _two_methods():
    """pd and frd in the runs table's order (the order asked for), frd first in the episodes."""
    episodes = pd.concat([_episodes().assign(method="frd"),
                          _episodes().assign(method="pd", run_id=lambda e: e["run_id"] + "-pd")])
    runs = pd.DataFrame({"run_id": ["r0-pd", "r1-pd", "r0", "r1"], "method": ["pd", "pd", "frd", "frd"],
                         "seed": [0, 1, 0, 1], "n_agents": 2, "completed": [True, False, True, True],
                         "mission_episodes": [10, 3, 10, 3], "rounds": [2, 1, 2, 1],
                         "bits_up": [4e6, 2e6, 1e5, 5e4], "bits_down": [8e6, 4e6, 2e5, 1e5]})
    return episodes, runs


def test_payload_bars_start_at_zero_on_a_linear_axis_in_the_methods_order():
    fig = payload_figure(_two_methods()[1])
    per_round, total = fig.axes
    for ax in (per_round, total):
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
        assert [t.get_text() for t in ax.get_xticklabels()] == ["pd", "frd"]
        assert all(bar.get_y() == 0 for bar in ax.patches)
    # per agent and round: pd's uplink median of 4e6/(2·2) and 2e6/(1·2) = 1e6; frd's 2.5e4
    assert [bar.get_height() for bar in per_round.patches[:2]] == [1e6, 2.5e4]
    assert [t.get_text() for t in per_round.texts[:2]] == ["1e+06", "25000"]  # each bar's value, readable however small


def test_mission_legend_and_boxes_name_the_methods_in_one_order():
    episodes, runs = _two_methods()
    left, right = mission_figure(episodes, runs).axes
    assert method_order(runs) == ["pd", "frd"]
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["pd", "frd"]
    assert [t.get_text() for t in right.get_xticklabels()] == ["pd", "frd"]
