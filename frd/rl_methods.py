"""The RL exchange schemes [seed 001]: what each uploads, how the server aggregates, what an
agent does with the download. The round itself is ``frd.exchange.run_round``.

* ``frl``: actor weights up, their equal-weight average down (option: critic too).
* ``pd``: the raw experience memory (states, action probabilities) up; the concatenation of
  all agents' memories down; each agent distills it (eq. 26).
* ``frd``: per visited grid cell the mean policy up; per cell the mean of the agents' means
  down (count-weighted as an option); each agent distills it at the cell midpoints (eq. 28).
* ``independent``: no exchange, the lower baseline.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from agents.a2c import A2CPopulation
from envs.grid import StateGrid
from frd.errors import FrdError
from frd.payload import FLOAT_BITS, Payload, index_bits


@dataclass
class RunRound:
    """What a method sees of one run at one exchange round."""

    population: A2CPopulation
    rows: Mapping[int, int]                       # agent → population row
    memories: Mapping[int, tuple[np.ndarray, np.ndarray]]  # agent → (states, probs) of the period
    grid: StateGrid | None
    codec: str
    weighting: str
    with_critic: bool
    rng: np.random.Generator


class DistillingExchange:
    """Downloads are collected, then ``apply`` distills all receivers of one memory together."""

    def __init__(self, ctx: RunRound) -> None:
        self.ctx = ctx
        self.received: dict[int, Payload] = {}

    def download(self, agent: int, payload: Payload) -> None:
        self.received[agent] = payload

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def apply(self) -> None:
        groups: dict[int, list[int]] = {}
        for agent, payload in self.received.items():
            groups.setdefault(id(payload), []).append(agent)
        for agents in groups.values():
            states, probs = self.target(self.received[agents[0]])
            if len(states):
                self.ctx.population.distill([self.ctx.rows[a] for a in agents], states, probs, self.ctx.rng)


class PDExchange(DistillingExchange):
    def upload(self, agent: int) -> Payload:
        states, probs = self.ctx.memories[agent]
        return Payload.of("memory", len(states), states=(states, FLOAT_BITS), probs=(probs, FLOAT_BITS))

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        merged = Payload.of("global_memory", sum(u.entries for u in uploads.values()),
                            states=(np.concatenate([u["states"] for u in uploads.values()]), FLOAT_BITS),
                            probs=(np.concatenate([u["probs"] for u in uploads.values()]), FLOAT_BITS))
        return {p: merged for p in participants}

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        return payload["states"], payload["probs"]


def local_proxy_memory(grid: StateGrid, states: np.ndarray, probs: np.ndarray):
    """(visited cells, mean policy per cell, visits per cell) [seed 001, FRD steps 1–2]."""
    cells, inverse, counts = np.unique(grid.cell_index(states), return_inverse=True, return_counts=True)
    sums = np.zeros((len(cells), probs.shape[1]), np.float64)
    np.add.at(sums, inverse, probs)
    return cells, (sums / counts[:, None]).astype(np.float32), counts


def global_proxy_memory(memories: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], weighting: str):
    """Per cell, the mean of the local mean policies of the agents that visited it
    [seed 001, FRD step 4]; ``count`` weights each agent by its visits instead."""
    cells = np.concatenate([m[0] for m in memories])
    policy = np.concatenate([m[1] for m in memories]).astype(np.float64)
    weight = (np.concatenate([m[2] for m in memories]).astype(np.float64) if weighting == "count"
              else np.ones(len(cells)))
    unique, inverse = np.unique(cells, return_inverse=True)
    sums = np.zeros((len(unique), policy.shape[1]))
    np.add.at(sums, inverse, policy * weight[:, None])
    return unique, (sums / np.bincount(inverse, weight)[:, None]).astype(np.float32)


class FRDExchange(DistillingExchange):
    def _encode(self, kind: str, cells: np.ndarray, policy: np.ndarray, counts: np.ndarray | None) -> Payload:
        grid = self.ctx.grid
        arrays = {"policy": (policy, FLOAT_BITS)}
        if self.ctx.codec == "paper":
            arrays["states"] = (grid.midpoints(cells), FLOAT_BITS)
        else:
            arrays["cells"] = (cells, index_bits(grid.n_cells))
        if counts is not None:
            arrays["counts"] = (counts, FLOAT_BITS)
        return Payload.of(kind, len(cells), **arrays)

    def _cells(self, payload: Payload) -> np.ndarray:
        return payload["cells"] if "cells" in payload.arrays else self.ctx.grid.cell_index(payload["states"])

    def upload(self, agent: int) -> Payload:
        cells, policy, counts = local_proxy_memory(self.ctx.grid, *self.ctx.memories[agent])
        return self._encode("proxy_memory", cells, policy, counts if self.ctx.weighting == "count" else None)

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        local = [(self._cells(u), u["policy"], u["counts"] if "counts" in u.arrays else np.ones(u.entries))
                 for u in uploads.values()]
        merged = self._encode("global_proxy_memory", *global_proxy_memory(local, self.ctx.weighting), None)
        return {p: merged for p in participants}

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        return self.ctx.grid.midpoints(self._cells(payload)), payload["policy"]


class FRLExchange:
    """Federated averaging of actor (and optionally critic) weights, equal weights."""

    def __init__(self, ctx: RunRound) -> None:
        self.ctx = ctx

    def _state(self, agent: int) -> dict[str, np.ndarray]:
        pop, row = self.ctx.population, self.ctx.rows[agent]
        state = {f"actor.{k}": v for k, v in pop.actor_state(row).items()}
        if self.ctx.with_critic:
            state.update({f"critic.{k}": v for k, v in pop.critic_state(row).items()})
        return state

    def upload(self, agent: int) -> Payload:
        state = self._state(agent)
        return Payload.of("weights", sum(v.size for v in state.values()),
                          **{k: (v, FLOAT_BITS) for k, v in state.items()})

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        first = next(iter(uploads.values()))
        for u in uploads.values():
            shapes = {k: a.values.shape for k, a in u.arrays.items()}
            if shapes != {k: a.values.shape for k, a in first.arrays.items()}:
                raise FrdError("FRL averages weights, so every agent needs the same actor architecture; "
                               "use pd or frd for agents with different networks")
        mean = {k: (np.mean([u[k] for u in uploads.values()], axis=0), FLOAT_BITS) for k in first.arrays}
        averaged = Payload.of("global_weights", first.entries, **mean)
        return {p: averaged for p in participants}

    def download(self, agent: int, payload: Payload) -> None:
        pop, row = self.ctx.population, self.ctx.rows[agent]
        for net, load in (("actor", pop.load_actor_state), ("critic", pop.load_critic_state)):
            part = {k.split(".", 1)[1]: payload[k] for k in payload.arrays if k.startswith(net + ".")}
            if part:
                load(row, part)

    def apply(self) -> None:
        """Weights are loaded as they arrive; nothing is left to do."""


@dataclass(frozen=True)
class RLMethod:
    name: str
    description: str
    exchange: Callable[[RunRound], object] | None = None  # None: never exchanges
    records_memory: bool = False
    needs_grid: bool = False


METHODS: dict[str, RLMethod] = {m.name: m for m in (
    RLMethod("independent", "no exchange (lower baseline)"),
    RLMethod("frl", "federated RL: average actor weights", FRLExchange),
    RLMethod("pd", "policy distillation: share raw experience memories", PDExchange, records_memory=True),
    RLMethod("frd", "federated reinforcement distillation: share per-cluster mean policies",
             FRDExchange, records_memory=True, needs_grid=True),
)}


def get_method(name: str) -> RLMethod:
    if name not in METHODS:
        raise FrdError(f"unknown RL method {name!r}; choose from {', '.join(METHODS)}")
    return METHODS[name]
