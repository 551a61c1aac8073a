"""Update periods of a CartPole batch in one numba call, run by run and lane by lane.

The lockstep step (``RLBatch.step``) crosses from Python into numba three times per env step and
streams every lane's weights through the cache at every step. Between two updates, though, runs
are independent of one another, so ``periods`` takes each run in turn through several update
periods (``n`` steps and the update each; ``RLBatch._periods_at_once``: 16 at n = 8) while its
lanes' weights and Adam moments stay in cache, stopping the run early when an episode's end
needs the runner (a completed mission, a cap, a barrier), and then goes on to the next run. So
runs of one batch may stand at different steps after a call: each lane's action draws and first
states follow its own place (``row_periods``). Inside a run the lanes still go step by step
together, because an episode's end can stop the run's other lanes (the first agent to complete
ends an ``until first`` run).

Every lane does exactly the lockstep step's arithmetic (the same ``frd.agents.kernel`` and
``frd.envs.lanes._cartpole_step`` functions on the same arrays), and an episode's end is decided by
the same rule, on the runner's own arrays (``frd.rl.episode_end.end_episode``): completed (mission
window), capped, or at the exchange barrier. The episodes are returned as events, with what the
rule did, that the runner records in lockstep order, so a run's tables are bit for bit the
lockstep ones (tested).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from frd.agents import kernel
from frd.envs.lanes import _cartpole_step
from frd.jit import compiled
from frd.rl.episode_end import DROPPED, GOES_ON, end_episode


class LaneArrays(NamedTuple):
    """The batch's per-lane arrays a period steps: the state to act on [L, d], the episode's score so
    far, the steps taken, and whether the lane keeps an experience memory."""

    obs: np.ndarray
    score: np.ndarray
    env_steps: np.ndarray
    records: np.ndarray


class MemoryArrays(NamedTuple):
    """Every lane's experience memory (``ExperienceMemory``): states, action probabilities, fill."""

    states: np.ndarray
    probs: np.ndarray
    size: np.ndarray


class External(NamedTuple):
    """The lanes whose agent is not ours (Stable-Baselines3, ``frd.rl.runner``): their rows and env
    lanes stay idle; while its collection lasts (``until``: its last step, counted from its run's
    first step in the call, 0-based) such a lane takes a step of it at every step, unless its run
    has ended or it is retired, and an episode of it ends where ``ends`` (per lane and step of its
    run in the call) holds the episode's score (NaN: none). The runner hands a call a first period
    that the lanes' current collections cover, or that lanes at the barrier wait through; a run
    stops before a later period that they do not cover (``_external_due``)."""

    lane: np.ndarray
    until: np.ndarray
    ends: np.ndarray


class Events(NamedTuple):
    """The episode ends a call writes, one entry each: the step (from the call's first), the lane,
    its episode number, score and steps so far, and what the end did (``frd.rl.episode_end.end_episode``'s
    answer)."""

    tick: np.ndarray
    lane: np.ndarray
    episode: np.ndarray
    score: np.ndarray
    steps: np.ndarray
    what: np.ndarray


@compiled(error_model="numpy")
def periods(most, rows, dims, nets, adam, rollout, cache, hyper, uniforms, env, lanes, external, memory, mission,
            standing, events, row_periods):
    """Update periods of every run whose rows are ``rows`` (population row → env lane; a run's
    ``mission.agents`` lanes are consecutive rows), each ``n`` lockstep steps and the update, run by
    run: each run takes at most ``most`` of them before the next run, and stops after one in which
    an episode's end did more than end the episode (a mission completed, a lane capped or at the
    barrier: the runner acts on those between calls). Runs are independent until then, so how
    many periods a run takes in one call, and whether its batch-mates took as many, changes no
    result. The population's bundles (``frd.agents.kernel``) are indexed by row, the env's
    (``CartPoleState``), the batch's (``lanes``, ``standing``) and the memory's by lane;
    ``uniforms`` has a row per step of the ``most`` periods; ``external`` lanes play their
    collection's steps and episode ends (``External``), and a run stops where one of them needs
    Python (a new collection) or its round's safe point has come. Writes each row's number of periods
    into ``row_periods`` and returns the number of ``events`` written (their ticks count the
    steps from the call's first, each run's own). The bundles are unpacked once: the loops run
    on local names."""
    d, h, o, relu = dims
    pa = nets.actor
    n = rollout.obs.shape[1]
    A = mission.agents
    r_obs, r_next, r_actions, r_rewards, r_terminated, r_done, r_valid = rollout
    failure_reward = hyper.failure_reward
    state, env_steps_in_episode, c, max_steps, resets, next_reset = env
    obs, score, env_steps, records = lanes
    memory_states, memory_probs, memory_size = memory
    active, episode, finished, capped = standing.active, standing.episode, standing.finished, standing.capped
    foreign, foreign_until, foreign_ends = external
    ev_tick, ev_lane, ev_episode, ev_score, ev_steps, ev_what = events
    R = rows.shape[0]
    row_obs = np.empty((R, obs.shape[1]), np.float32)
    actions = np.zeros(R, np.int64)
    probs = np.zeros((R, o), np.float32)
    stepping = np.zeros(R, np.bool_)
    ended = np.zeros(R, np.bool_)
    one_action = np.zeros(1, np.int64)
    one_active = np.ones(1, np.bool_)
    next_obs = np.empty((1, obs.shape[1]), np.float32)
    final_obs = np.empty((1, obs.shape[1]), np.float32)
    reward = np.empty(1, np.float32)
    terminated = np.empty(1, np.bool_)
    truncated = np.empty(1, np.bool_)
    scratch = kernel.learn_scratch(n, d, h, o, pa.shape[1], nets.critic.shape[1])
    no_grads = np.zeros((0, 0), np.float32)
    count = 0
    for first in range(0, R, A):
        for done in range(1, most + 1):
            start, first_event = (done - 1) * n, count
            for t in range(n):
                for row in range(first, first + A):
                    lane = rows[row]
                    stepping[row] = active[lane] and not foreign[lane]
                    for k in range(obs.shape[1]):
                        row_obs[row, k] = obs[lane, k]
                    kernel.act_lane(row, pa, row_obs, uniforms[start + t, row], t, dims, cache, actions, probs,
                                    stepping[row])
                    if stepping[row] and records[lane]:
                        at = memory_size[lane]
                        memory_states[lane, at] = row_obs[row]
                        memory_probs[lane, at] = probs[row]
                        memory_size[lane] = at + 1
                    one_action[0] = actions[row]
                    one_active[0] = stepping[row]
                    _cartpole_step(state[:, lane:lane + 1], env_steps_in_episode[lane:lane + 1], one_action, one_active,
                                   c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], max_steps,
                                   resets[lane:lane + 1], next_reset[lane:lane + 1], next_obs, final_obs, reward,
                                   terminated, truncated)
                    r_obs[row, t] = row_obs[row]
                    r_next[row, t] = final_obs[0]
                    r_actions[row, t] = actions[row]
                    fail = terminated[0] and not np.isnan(failure_reward)
                    r_rewards[row, t] = np.float32(failure_reward) if fail else reward[0]
                    r_terminated[row, t] = terminated[0]
                    r_done[row, t] = terminated[0] or truncated[0]
                    r_valid[row, t] = np.float32(stepping[row])
                    score[lane] += reward[0]
                    env_steps[lane] += stepping[row]
                    ended[row] = stepping[row] and (terminated[0] or truncated[0])
                    obs[lane] = next_obs[0]
                    if foreign[lane] and not finished[lane // A] and not capped[lane] and foreign_until[lane] >= start + t:
                        env_steps[lane] += 1
                        ended[row] = not np.isnan(foreign_ends[lane, start + t])
                if t == n - 1:
                    for row in range(first, first + A):
                        kernel.learn_lane(row, n, dims, nets, adam, rollout, cache, hyper, no_grads, no_grads, scratch)
                for row in range(first, first + A):
                    if not ended[row]:
                        continue
                    lane = rows[row]
                    points = foreign_ends[lane, start + t] if foreign[lane] else score[lane]
                    what = end_episode(lane, points, mission, standing)
                    if what == DROPPED:
                        continue
                    ev_tick[count], ev_lane[count], ev_score[count] = start + t, lane, points
                    ev_steps[count], ev_episode[count], ev_what[count] = env_steps[lane], episode[lane], what
                    if not foreign[lane]:
                        score[lane] = 0.0
                    count += 1
            if (_needs_runner(ev_what, first_event, count) or done == most
                    or _external_due(rows, first, A, done, n, external, standing)):
                for row in range(first, first + A):
                    row_periods[row] = done
                break
    return count


@compiled(error_model="numpy")
def _external_due(rows, first, A, done, n, external, standing):
    """Whether the run of rows ``first``… must stop after its ``done`` periods for an external lane
    of it that plays on: one must start its next collection in the next period (Python's, between
    calls), or its collection ended at the barrier in this one (its run is then ready for the
    round, at this safe point)."""
    foreign, until = external.lane, external.until
    if standing.finished[rows[first] // A]:
        return False
    for row in range(first, first + A):
        lane = rows[row]
        if not foreign[lane] or standing.capped[lane]:
            continue
        if standing.active[lane] and until[lane] < (done + 1) * n - 1:
            return True
        if standing.waiting[lane] and (done - 1) * n <= until[lane] < done * n:
            return True
    return False


@compiled(error_model="numpy")
def _needs_runner(ev_what, first, last):
    """Whether one of the episode ends ``first``…``last`` did more than end the episode."""
    for e in range(first, last):
        if ev_what[e] != GOES_ON:
            return True
    return False
