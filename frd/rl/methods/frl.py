"""FRL: federated averaging of the actor (and optionally critic) weights, equal weights.

Agents of other learners take part when their averaged network has our actor's shape
[our reading of issue 43]: an SB3 PPO or A2C policy with hidden layers [h, h] and tanh (SB3's
default 64-64 at h = 64) is an actor obs → h → h → |A| like ours, and its critic a value network
obs → h → h → 1 like ours, so they average layer by layer (``frd.agents.sb3.SB3Learner.state``).
A DQN's Q-network is no actor: it averages only with DQNs of its shape (it has no critic)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from frd.errors import FrdError
from frd.exchange import broadcast
from frd.payload import FLOAT_BITS, Payload
from frd.rl.methods.base import RunSetup, Strategy


@dataclass(frozen=True)
class FRLOptions:
    """What FRL averages."""

    critic: bool = field(default=False, metadata={"flag": "frl-critic"})
    """Average the critic's weights too, not only the actor's."""


class FederatedRL(Strategy):
    description = "federated RL: average actor weights"
    Options = FRLOptions

    @classmethod
    def check(cls, options: FRLOptions, setup: RunSetup) -> None:
        """Weights of different shapes have no average: refused before anything runs, naming the
        agents whose network does not match agent 0's."""
        if len(set(setup.architectures)) > 1:
            first, algos = setup.architectures[0], setup.algorithms or ("",) * len(setup.architectures)
            odd = [f"agent {a} ({algos[a]}) has {arch}" for a, arch in enumerate(setup.architectures) if arch != first]
            raise FrdError(f"frl averages weights, so its agents need one architecture (--agent-spec): agent 0 ({algos[0]}) "
                           f"has {first}, but {', '.join(odd)}; use pd or frd, which exchange policies")
        if len(set(setup.widths)) > 1:
            raise FrdError(f"frl averages weights, so its agents need one hidden width (--agent-spec gives "
                           f"{', '.join(map(str, sorted(set(setup.widths))))}); use pd or frd, which exchange policies")

    def _state(self, agent: int) -> dict[str, np.ndarray]:
        pop, row = self.round.population, self.round.rows[agent]
        state = {f"actor.{k}": v for k, v in pop.actor_state(row).items()}
        if self.options.critic:
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
        return broadcast(Payload.of("global_weights", first.entries, **mean), participants)

    def download(self, agent: int, payload: Payload) -> None:
        """Weights are loaded as they arrive."""
        pop, row = self.round.population, self.round.rows[agent]
        for net, load in (("actor", pop.load_actor_state), ("critic", pop.load_critic_state)):
            part = {k.split(".", 1)[1]: payload[k] for k in payload.arrays if k.startswith(net + ".")}
            if part:
                load(row, part)
