"""Per-lane networks and optimizer: one set of weights per lane, stacked on a leading axis.

A forward pass for all lanes is one ``baddbmm`` per layer. Each network keeps its parameters
in one ``[L, N]`` buffer and its gradients in another; every layer is a leaf *view* of the
first whose ``.grad`` is preset to a view of the second. Autograd then accumulates straight
into the flat gradient (slicing views out of one flat *leaf* instead made it zero-fill every
layer's gradient), and the optimizer and the clip work on two big tensors, not many small ones.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import torch

# A width-1 output layer's bias view ([L, 1, 1], row stride N) is not "dense", so autograd warns
# that its gradient view is not contiguous; it still accumulates in place (tested), only slower.
warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


class StackedMLP:
    """``sizes[0] → … → sizes[-1]`` MLP per lane; layer weights ``[L, in, out]``, biases ``[L, 1, out]``.

    Initialised per lane from the lane's own generator (orthogonal, as Stable-Baselines3), so a
    lane's starting weights do not depend on which other lanes share the stack.
    """

    def __init__(self, generators: Sequence[torch.Generator], sizes: Sequence[int],
                 activation: str, output_gain: float) -> None:
        self.activation = ACTIVATIONS[activation]
        self.shapes = [((fan_in, fan_out), (1, fan_out)) for fan_in, fan_out in zip(sizes[:-1], sizes[1:])]
        width = sum(i * o + o for (i, o), _ in self.shapes)
        self.data = torch.zeros(len(generators), width)
        self._bind()
        for layer, w in enumerate(self.weights):
            gain = output_gain if layer == len(self.weights) - 1 else 2 ** 0.5
            init = torch.empty(w.shape[2], w.shape[1])
            with torch.no_grad():
                for lane, gen in enumerate(generators):
                    w[lane].copy_(torch.nn.init.orthogonal_(init, gain=gain, generator=gen).T)

    def _bind(self) -> None:
        """(Re)create the per-layer leaf views of ``data`` and their gradient views of ``grad``."""
        L = self.data.shape[0]
        self.grad = torch.zeros_like(self.data)
        self.weights, self.biases = [], []
        at = 0
        for wshape, bshape in self.shapes:
            for shape, out in ((wshape, self.weights), (bshape, self.biases)):
                n = shape[0] * shape[1]
                p = self.data[:, at:at + n].view(L, *shape).requires_grad_()
                p.grad = self.grad[:, at:at + n].view(L, *shape)
                out.append(p)
                at += n

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
        self.data = self.data[rows].clone()
        self._bind()


class LaneAdam:
    """torch's fused Adam with one parameter per lane: a row view of the network's flat buffer.

    A lane that sits out an update (waiting at a barrier, say) gets no gradient, so Adam skips
    it entirely: no momentum step, no step count. ``torch.optim.Adam`` over the stacked tensors
    would instead keep moving such a lane through its momentum.
    """

    def __init__(self, net: StackedMLP, lr: float) -> None:
        self.net, self.lr = net, lr
        self._rows, self._mask = self._make_optimizer()

    def _make_optimizer(self) -> tuple[list[torch.Tensor], list[bool] | None]:
        rows = [self.net.data[lane] for lane in range(self.net.data.shape[0])]
        self.opt = torch.optim.Adam(rows, lr=self.lr, fused=True)
        return rows, None

    def step(self, mask: torch.Tensor) -> None:
        """One Adam step for the lanes where ``mask`` is true; gradients are then cleared."""
        flags = mask.tolist()
        if flags != self._mask:  # rebinding 256 gradients costs more than the step itself
            for lane, (row, on) in enumerate(zip(self._rows, flags)):
                row.grad = self.net.grad[lane] if on else None
            self._mask = flags
        self.opt.step()
        self.net.grad.zero_()

    def keep(self, rows: torch.Tensor) -> None:
        """Follow ``StackedMLP.keep``: the kept lanes carry their Adam state along."""
        old_rows, old_state = self._rows, self.opt.state
        self._rows, self._mask = self._make_optimizer()
        for new, old in zip(self._rows, rows.tolist()):
            if old_rows[old] in old_state:
                self.opt.state[new] = {k: v.clone() for k, v in old_state[old_rows[old]].items()}


def clip_per_lane(nets: Sequence[StackedMLP], max_norm: float) -> None:
    """Scale each lane's gradient (over all ``nets`` jointly) to norm ≤ ``max_norm``."""
    with torch.no_grad():
        norm = sum(net.grad.pow(2).sum(1, keepdim=True) for net in nets).sqrt_()
        scale = (max_norm / (norm + 1e-6)).clamp_(max=1.0)
        for net in nets:
            net.grad.mul_(scale)
