"""What PD and FRD share: the downloaded memory is distilled into the receivers' actors, with
the controls that decide how much, towards whom and towards which policy [Seo et al. 2022, §4, eqs. 26/28
for the defaults; the controls are ours, to find out when sharing helps]."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from frd.agents.a2c import distill_passes
from frd.options import at_least, positive
from frd.payload import FLOAT_BITS, Array, Payload
from frd.rl.methods.base import RoundContext, RunSetup, Strategy


@dataclass(frozen=True)
class DistillOptions:
    """How an agent distils a downloaded memory."""

    distill_epochs: int = 1
    """Passes over the downloaded memory per round (the FRD chapter's protocol)."""
    distill_steps: int | None = None
    """Exactly this many minibatches per round, whatever the memory's size; None: distill_epochs passes."""
    distill_batch: int = 64
    """Minibatch size of that distillation."""
    distill_lr: float = 1e-4
    """Learning rate of the distillation's own per-lane Adam (the RL optimizer's moments stay clean)."""
    distill_target: Literal["all", "others", "best", "better"] = "all"
    """Whose memory an agent distils: all agents' (its own included), the others', the agent with
    the best recent mean's, or only peers whose recent mean beats its own (scores then go up too)."""
    distill_policy: Literal["behaviour", "current"] = "behaviour"
    """The policy uploaded at the memory's states: the one the agent acted with, or its current actor's."""
    distill_temperature: float = 1.0
    """τ on the teacher, p^(1/τ) renormalised: below 1 sharpens, above 1 flattens."""
    leader_distills: bool = True
    """Whether the agent with the best recent mean distils too."""

    def __post_init__(self) -> None:
        at_least(self, distill_epochs=1, distill_steps=1, distill_batch=1)
        positive(self, "distill_lr", "distill_temperature")


def sharpen(probs: np.ndarray, temperature: float) -> np.ndarray:
    """p^(1/τ) renormalised per row (τ = 1 returns ``probs`` unchanged)."""
    if temperature == 1.0:
        return probs
    powered = np.power(np.asarray(probs, np.float64), 1.0 / temperature)
    return (powered / powered.sum(1, keepdims=True)).astype(np.float32)


class DistillingStrategy(Strategy):
    """Uploads carry the agent's recent mean when the target needs it; the server builds each
    receiver's teacher from the uploads its target selects; ``finish_round`` distils all
    receivers of one teacher together and logs steps and cross-entropy before and after."""

    records_memory = True

    def __init__(self, options: Any, setup: RunSetup) -> None:
        super().__init__(options, setup)
        self.received: dict[int, Payload] = {}

    def begin_round(self, ctx: RoundContext) -> None:
        super().begin_round(ctx)
        self.received = {}

    def memory(self, agent: int) -> tuple[np.ndarray, np.ndarray]:
        """The agent's memory of the period, relabelled with its current actor if asked."""
        states, probs = self.round.memories[agent]
        if self.options.distill_policy == "current" and len(states):
            probs = self.round.population.policy(self.round.rows[agent], states).astype(np.float32)
        return states, probs

    def with_score(self, agent: int, payload: Payload) -> Payload:
        """Add the agent's recent mean score (one float) when the server must rank agents."""
        if self.options.distill_target not in ("best", "better"):
            return payload
        score = np.array([self.round.recent_scores[agent]], np.float32)
        return Payload(payload.kind, {**payload.arrays, "score": Array(score, FLOAT_BITS)}, payload.entries)

    def teachers(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, list[int]]:
        """Per receiver, whose uploads make its teacher (empty: it receives nothing)."""
        target = self.options.distill_target
        if target == "all":
            chosen = {p: list(uploads) for p in participants}
        elif target == "others":
            chosen = {p: [q for q in uploads if q != p] for p in participants}
        else:
            score = {q: float(u["score"][0]) for q, u in uploads.items()}
            best = max(score, key=lambda q: (score[q], -q))
            chosen = ({p: [best] if p != best else [] for p in participants} if target == "best" else
                      {p: [q for q in uploads if score[q] > score.get(p, -np.inf)] for p in participants})
        return {p: sorted(qs) for p, qs in chosen.items()}

    def merge(self, uploads: Sequence[Payload]) -> Payload:
        """The server's teacher payload from some agents' uploads."""
        raise NotImplementedError

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        merged: dict[tuple[int, ...], Payload] = {}
        out = {}
        for p, sources in self.teachers(uploads, participants).items():
            if sources:
                key = tuple(sources)
                if key not in merged:
                    merged[key] = self.merge([uploads[q] for q in sources])
                out[p] = merged[key]  # one object per teacher: its receivers distil together
        return out

    def download(self, agent: int, payload: Payload) -> None:
        self.received[agent] = payload

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        """(states, action probabilities) to distil towards."""
        raise NotImplementedError

    def distilling_groups(self, received: Mapping[int, Payload], recent_scores: Mapping[int, float]) -> list[list[int]]:
        """Receivers that distil one teacher together, in the order ``finish_round`` takes them
        (the leader, the agent with the best recent mean, left out unless it distils)."""
        leader = max(recent_scores, key=lambda a: (recent_scores[a], -a)) if recent_scores else None
        groups: dict[int, list[int]] = {}
        for agent, payload in received.items():
            if self.options.leader_distills or agent != leader:
                groups.setdefault(id(payload), []).append(agent)
        return list(groups.values())

    def finish_rng_states(self, received: Mapping[int, Payload], recent_scores: Mapping[int, float],
                          rng: np.random.Generator) -> dict[int, Mapping[str, Any]]:
        """Each group's distillation draws its shuffles from the round's generator in turn: the
        state at which each receiver's group starts."""
        o, out = self.options, dict[int, Mapping[str, Any]]()
        for agents in self.distilling_groups(received, recent_scores):
            state, n = rng.bit_generator.state, len(self.target(received[agents[0]])[0])
            for _ in range(distill_passes(n, epochs=o.distill_epochs, batch=o.distill_batch, steps=o.distill_steps)):
                rng.permutation(n)
            out.update(dict.fromkeys(agents, state))
        return out

    def finish_round(self) -> None:
        ctx, o = self.round, self.options
        for agents in self.distilling_groups(self.received, ctx.recent_scores):
            states, probs = self.target(self.received[agents[0]])
            if not len(states):
                continue
            probs = sharpen(probs, o.distill_temperature)
            rows = [ctx.rows[a] for a in agents]
            before = ctx.population.cross_entropy(rows, states, probs)
            steps = ctx.population.distill(rows, states, probs, ctx.rng, epochs=o.distill_epochs,
                                           batch=o.distill_batch, lr=o.distill_lr, steps=o.distill_steps)
            after = ctx.population.cross_entropy(rows, states, probs)
            self.log += [dict(agent=a, entries=len(states), steps=steps, loss_before=float(b), loss_after=float(f))
                         for a, b, f in zip(agents, before, after)]
