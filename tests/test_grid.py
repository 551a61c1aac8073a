"""The FRD state grid against hand values."""
import gymnasium as gym
import numpy as np
import pytest

from frd.envs.grid import CARTPOLE_BOUNDS, StateGrid, grid_for
from frd.errors import FrdError


def test_cells_and_midpoints_by_hand():
    grid = StateGrid(np.array([0.0, -1.0]), np.array([1.0, 1.0]), intervals=4)
    # dim 0: width 0.25 → 0.3 is interval 1; dim 1: width 0.5 → 0.2 is interval 2
    assert grid.cell_coords(np.array([0.3, 0.2])).tolist() == [1, 2]
    assert int(grid.cell_index(np.array([0.3, 0.2]))) == 1 * 4 + 2
    np.testing.assert_allclose(grid.midpoints(np.array(6)), [0.375, 0.25])
    assert grid.n_cells == 16


def test_values_outside_bounds_clip_into_edge_cells():
    grid = StateGrid(np.array([0.0]), np.array([1.0]), intervals=10)
    assert grid.cell_coords(np.array([[-5.0], [1.0], [7.0]])).ravel().tolist() == [0, 9, 9]


def test_midpoint_maps_back_to_its_cell():
    grid = StateGrid(np.array(CARTPOLE_BOUNDS)[:, 0], np.array(CARTPOLE_BOUNDS)[:, 1], intervals=30)
    cells = np.array([0, 17, 30 ** 4 - 1, 123456])
    np.testing.assert_array_equal(grid.cell_index(grid.midpoints(cells)), cells)


def test_cartpole_seed_example_pole_angle_midpoint():
    # The FRD chapter's example: pole-angle cluster [-90°, 0°) has proxy -45° (two intervals over ±90°).
    grid = StateGrid(np.array([-90.0]), np.array([90.0]), intervals=2)
    np.testing.assert_allclose(grid.midpoints(grid.cell_index(np.array([-30.0]))), [-45.0])


def test_bounds_come_from_config_cartpole_or_finite_space():
    space = gym.spaces.Box(-np.ones(2), np.ones(2))
    assert grid_for("Other-v0", space, 5).low.tolist() == [-1.0, -1.0]
    assert grid_for("CartPole-v1", gym.make("CartPole-v1").observation_space, 30).high[2] == pytest.approx(0.2095)
    assert grid_for("Other-v0", space, 5, bounds=[(0, 2), (0, 3)]).high.tolist() == [2.0, 3.0]


def test_infinite_bounds_without_config_is_a_clear_error():
    space = gym.spaces.Box(-np.inf, np.inf, shape=(3,))
    with pytest.raises(FrdError, match="give state-grid bounds"):
        grid_for("Other-v0", space, 5)
