"""A population of lanes whose learners differ (issue 12: heterogeneous populations).

Lanes are grouped by their A2C config (width, recipe, rates), one ``A2CPopulation`` (one
stacked network, one kernel call) per group, so a batch still steps every lane in a few calls
whatever the mix. Rows are the runner's: global, in lane order; each maps to (group, row in
that group). With one group every call goes straight to it, so a homogeneous population
computes exactly what a bare ``A2CPopulation`` does.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from frd.agents.a2c import A2CConfig, A2CPopulation


class GroupedPopulation:
    """``A2CPopulation``'s row interface (acting, learning, distilling, weights) over groups of lanes."""

    def __init__(self, lane_seeds: Sequence[int], obs_dim: int, n_actions: int, configs: Sequence[A2CConfig],
                 init_seeds: Sequence[int]) -> None:
        """``configs[i]`` is lane i's learner; ``lane_seeds`` and ``init_seeds`` as in ``A2CPopulation``."""
        kinds = list(dict.fromkeys(configs))  # groups in order of first appearance
        self._set_groups(np.array([kinds.index(c) for c in configs]))
        self.groups = [A2CPopulation([lane_seeds[i] for i in rows.tolist()], obs_dim, n_actions, kind,
                                     [init_seeds[i] for i in rows.tolist()]) for kind, rows in zip(kinds, self.members)]
        self.n_actions = n_actions

    def _set_groups(self, group_of: np.ndarray) -> None:
        self.group_of = group_of                                                  # row → its group
        self.members = [np.flatnonzero(group_of == g) for g in range(group_of.max() + 1)]  # group → its rows
        self.local = np.empty(len(group_of), np.int64)                            # row → its row in its group
        for rows in self.members:
            self.local[rows] = np.arange(len(rows))

    @property
    def lanes(self) -> int:
        return len(self.group_of)

    @property
    def between_updates(self) -> bool:
        """Every group has just updated (or not stepped since): weights may change, rows be dropped.
        Groups with different rollout lengths meet every lcm of them steps."""
        return all(g.rollout.t == 0 for g in self.groups)

    def _split(self, *arrays: np.ndarray) -> list[tuple[A2CPopulation, np.ndarray, list[np.ndarray]]]:
        """(group, its rows, its rows of each of ``arrays``) per group."""
        if len(self.groups) == 1:
            return [(self.groups[0], self.members[0], list(arrays))]
        return [(g, rows, [a[rows] for a in arrays]) for g, rows in zip(self.groups, self.members)]

    def act(self, obs: np.ndarray, active: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each group's lanes act with their own networks (``A2CPopulation.act``)."""
        active = np.ones(len(obs), bool) if active is None else active
        parts = [(rows, g.act(o, a)) for g, rows, (o, a) in self._split(obs, active)]
        if len(parts) == 1:
            return parts[0][1]
        actions, probs = np.empty(len(obs), np.int64), np.empty((len(obs), self.n_actions), np.float32)
        for rows, (a, p) in parts:
            actions[rows], probs[rows] = a, p
        return actions, probs

    def observe(self, *step: np.ndarray) -> None:
        """``A2CPopulation.observe`` per group: each learns when its own rollout is full."""
        for g, _, parts in self._split(*step):
            g.observe(*parts)

    def _by_group(self, rows: Sequence[int]) -> list[tuple[A2CPopulation, list[int], list[int]]]:
        """(group, positions in ``rows``, the group's rows there) for each group ``rows`` touch."""
        out = []
        for g, group in enumerate(self.groups):
            at = [i for i, row in enumerate(rows) if self.group_of[row] == g]
            if at:
                out.append((group, at, [int(self.local[rows[i]]) for i in at]))
        return out

    def distill(self, rows: Sequence[int], states: np.ndarray, target_probs: np.ndarray,
                rng: np.random.Generator, *, epochs: int, batch: int, lr: float, steps: int | None = None) -> int:
        """``A2CPopulation.distill`` per group, every group on the same minibatches (``rng`` replayed
        from its state, so it ends where one call over all ``rows`` would leave it)."""
        start, done = rng.bit_generator.state, 0
        for group, _, local in self._by_group(rows):
            rng.bit_generator.state = start
            done = group.distill(local, states, target_probs, rng, epochs=epochs, batch=batch, lr=lr, steps=steps)
        return done

    def cross_entropy(self, rows: Sequence[int], states: np.ndarray, target_probs: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), np.float32)
        for group, at, local in self._by_group(rows):
            out[at] = group.cross_entropy(local, states, target_probs)
        return out

    def _at(self, row: int) -> tuple[A2CPopulation, int]:
        return self.groups[self.group_of[row]], int(self.local[row])

    def policy(self, row: int, states: np.ndarray) -> np.ndarray:
        group, local = self._at(row)
        return group.policy(local, states)

    def actor_state(self, row: int) -> dict[str, np.ndarray]:
        group, local = self._at(row)
        return group.actor_state(local)

    def load_actor_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        group, local = self._at(row)
        group.load_actor_state(local, state)

    def critic_state(self, row: int) -> dict[str, np.ndarray]:
        group, local = self._at(row)
        return group.critic_state(local)

    def load_critic_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        group, local = self._at(row)
        group.load_critic_state(local, state)

    def networks(self, row: int) -> tuple[torch.nn.Sequential, torch.nn.Sequential]:
        group, local = self._at(row)
        return group.networks(local)

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in that order), each group its own of them (a group left with none
        is dropped); call between updates."""
        kept = self._by_group(rows)
        for group, _, local in kept:
            group.keep(local)
        self.groups = [group for group, _, _ in kept]
        self._set_groups(np.unique(self.group_of[list(rows)], return_inverse=True)[1])

