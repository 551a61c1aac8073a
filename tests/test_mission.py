"""The mission rule's reference reading [Seo et al. 2022, §4]: mean of the latest 10 episodes first reaching 490."""
from mission_reference import MissionWindow, first_completion, mission_episode


def test_fewer_than_window_episodes_never_complete():
    assert mission_episode([500.0] * 9) is None


def test_exactly_490_completes():
    assert mission_episode([490.0] * 10) == 10


def test_just_below_490_does_not():
    assert mission_episode([490.0] * 9 + [489.9]) is None


def test_average_over_latest_ten_only():
    scores = [10.0] * 5 + [500.0] * 9 + [410.0]  # latest ten: 9×500 + 410 = 4910 → 491
    assert mission_episode(scores) == 15


def test_window_forgets_old_episodes():
    w = MissionWindow(target=490, window=3)
    assert [w.add(s) for s in (500, 500, 400, 500, 500, 500)] == [False, False, False, False, False, True]


def test_first_completion_takes_the_earliest_agent():
    assert first_completion([[490.0] * 30, [100.0] * 5 + [500.0] * 10]) == 10
    assert first_completion([[1.0] * 30, [2.0] * 30]) is None


def test_a_config_built_in_code_takes_the_envs_mission_unless_given_one():
    # the CLI and code get the same default: the sharing study once ran Acrobot towards CartPole's 490
    from frd.rl.config import rl_config

    assert rl_config("independent").target == 490.0
    assert rl_config("pd", env_id="Acrobot-v1").target == -100.0
    assert rl_config("pd", env_id="Acrobot-v1", target=-50.0).target == -50.0


def test_the_rules_average_is_one_function_for_the_rule_the_tables_and_the_figures():
    """``window_means`` (TensorBoard's mission average, the learning curves) is ``window_mean``,
    the rule's: by hand, and against the rule's own ring after each episode of a lane."""
    import numpy as np

    from frd.rl import episode_end
    from frd.rl.config import rl_config

    assert episode_end.window_means(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    config = rl_config("independent", agents=1, window=3, target=1e9, max_episodes=100)
    standing = episode_end.standing(np.array([False]), 1, config.window, config.period)
    mission = episode_end.mission(config, 1)
    scores = np.array([0.1, 0.7, 0.2, 0.9, 0.3, 0.3000001])
    rule = []
    for score in scores:
        episode_end.end_episode(0, score, mission, standing)
        rule.append(episode_end.recent_mean(standing, 0))
    assert episode_end.window_means(scores, 3).tolist() == rule
