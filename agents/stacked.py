"""Per-lane networks and optimizer: one set of weights per lane, stacked on a leading axis.

A forward pass for all lanes is one ``baddbmm`` per layer. Each layer keeps its own leaf
tensors (slicing views out of one flat buffer made autograd zero-fill every layer's gradient).
"""
from __future__ import annotations

from typing import Sequence

import torch

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


class StackedMLP:
    """``sizes[0] → … → sizes[-1]`` MLP per lane; weights ``[L, in, out]``, biases ``[L, 1, out]``.

    Initialised per lane from the lane's own generator (orthogonal, as Stable-Baselines3), so a
    lane's starting weights do not depend on which other lanes share the stack.
    """

    def __init__(self, generators: Sequence[torch.Generator], sizes: Sequence[int],
                 activation: str, output_gain: float) -> None:
        self.activation = ACTIVATIONS[activation]
        self.weights: list[torch.Tensor] = []
        self.biases: list[torch.Tensor] = []
        for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            gain = output_gain if layer == len(sizes) - 2 else 2 ** 0.5
            w = torch.empty(len(generators), fan_out, fan_in)
            for lane, gen in enumerate(generators):
                torch.nn.init.orthogonal_(w[lane], gain=gain, generator=gen)
            self.weights.append(w.transpose(1, 2).contiguous().requires_grad_())
            self.biases.append(torch.zeros(len(generators), 1, fan_out, requires_grad=True))

    @property
    def params(self) -> list[torch.Tensor]:
        return [p for pair in zip(self.weights, self.biases) for p in pair]

    def __call__(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: [L, B, in] (or [len(rows), B, in] when only ``rows`` lanes are evaluated)."""
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if rows is not None:
                w, b = w[rows], b[rows]
            x = torch.baddbmm(b, x, w)
            if i < last:
                x = self.activation(x)
        return x

    def lane_state(self, lane: int) -> dict[str, torch.Tensor]:
        return {f"layer{i}.{kind}": p[lane].detach().clone()
                for i, pair in enumerate(zip(self.weights, self.biases)) for kind, p in zip(("weight", "bias"), pair)}

    def load_lane_state(self, lane: int, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for i, pair in enumerate(zip(self.weights, self.biases)):
                for kind, p in zip(("weight", "bias"), pair):
                    p[lane].copy_(torch.as_tensor(state[f"layer{i}.{kind}"]))

    def keep(self, rows: torch.Tensor) -> None:
        """Drop every lane not in ``rows`` (retired runs stop costing compute)."""
        self.weights = [w.detach()[rows].clone().requires_grad_() for w in self.weights]
        self.biases = [b.detach()[rows].clone().requires_grad_() for b in self.biases]


class LaneAdam:
    """Adam whose moments and step counts are per lane, and which moves only the lanes told to.

    ``torch.optim.Adam`` over stacked weights would keep moving a lane that sits out an update
    (waiting at a barrier, say) through its momentum; here such a lane is left exactly as it is.
    """

    def __init__(self, params_fn, lanes: int, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params_fn = params_fn  # re-read each step: ``keep`` replaces the leaf tensors
        self.lr, (self.b1, self.b2), self.eps = lr, betas, eps
        self.m = [torch.zeros_like(p) for p in params_fn()]
        self.v = [torch.zeros_like(p) for p in params_fn()]
        self.steps = torch.zeros(lanes)

    @torch.no_grad()
    def step(self, mask: torch.Tensor) -> None:
        """One Adam step for the lanes where ``mask`` is true; gradients are then cleared."""
        self.steps += mask
        shape = (-1, 1, 1)
        on = mask.to(torch.float32).view(shape)
        bias1 = 1 - self.b1 ** self.steps.clamp(min=1).view(shape)
        bias2 = 1 - self.b2 ** self.steps.clamp(min=1).view(shape)
        for p, m, v in zip(self.params_fn(), self.m, self.v):
            g = p.grad
            m.add_((g - m) * (on * (1 - self.b1)))
            v.add_((g * g - v) * (on * (1 - self.b2)))
            denom = (v / bias2 + 1e-30).sqrt_().add_(self.eps)  # +tiny: sqrt(0) is slow on CPU
            p.addcdiv_(m * (on * self.lr / bias1), denom, value=-1.0)
            p.grad = None

    def keep(self, rows: torch.Tensor) -> None:
        self.m = [m[rows].clone() for m in self.m]
        self.v = [v[rows].clone() for v in self.v]
        self.steps = self.steps[rows].clone()


def clip_per_lane(params: Sequence[torch.Tensor], max_norm: float) -> None:
    """Scale each lane's gradient (over all ``params`` jointly) to norm ≤ ``max_norm``."""
    with torch.no_grad():
        sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in params)
        scale = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0).view(-1, 1, 1)
        for p in params:
            p.grad.mul_(scale)
