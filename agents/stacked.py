"""Per-lane networks and optimizer: one set of weights per lane, stacked on a leading axis.

A forward pass for all lanes is one ``baddbmm`` per layer. Each network keeps its parameters
in one ``[L, N]`` buffer and its gradients in another; every layer is a leaf *view* of the
first whose ``.grad`` is preset to a view of the second. Autograd then accumulates straight
into the flat gradient (slicing views out of one flat *leaf* instead made it zero-fill every
layer's gradient), and the optimizer and the clip work on two big tensors, not many small ones.
"""
from __future__ import annotations

import copy
import warnings
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn

# A width-1 output layer's bias view ([L, 1, 1], row stride N) is not "dense", so autograd warns
# that its gradient view is not contiguous; it still accumulates in place (tested), only slower.
warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}
NUMPY_ACTIVATIONS = {"tanh": lambda x: np.tanh(x, out=x), "relu": lambda x: np.maximum(x, 0, out=x)}
MODULE_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def sequential(sizes: Sequence[int], activation: str) -> nn.Sequential:
    """One lane's network as a plain torch module: ``nn.Linear`` layers ``sizes[0] → … → sizes[-1]``
    with ``activation`` between them, for a saved agent's weights to load into. Its own initial
    draws come from a forked generator, so torch's global one is left as it was. (Not
    ``nn.utils.skip_init``: its meta tensors import sympy on first use, and in a Ray worker that
    import, racing another, failed with "module 'sympy' has no attribute 'printing'".)"""
    layers: list[nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), MODULE_ACTIVATIONS[activation]()]
    return nn.Sequential(*layers[:-1])


class StackedMLP:
    """``sizes[0] → … → sizes[-1]`` MLP per lane; layer weights ``[L, in, out]``, biases ``[L, 1, out]``.

    Initialised per lane from the lane's own generator (orthogonal, as Stable-Baselines3), so a
    lane's starting weights do not depend on which other lanes share the stack.
    """

    def __init__(self, generators: Sequence[torch.Generator], sizes: Sequence[int],
                 activation: str, output_gain: float) -> None:
        self.activation_name = activation
        self.activation = ACTIVATIONS[activation]
        self.numpy_activation = NUMPY_ACTIVATIONS[activation]
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
        self.weights: list[torch.Tensor] = []
        self.biases: list[torch.Tensor] = []
        at = 0
        for wshape, bshape in self.shapes:
            for shape, out in ((wshape, self.weights), (bshape, self.biases)):
                n = shape[0] * shape[1]
                p = self.data[:, at:at + n].view(L, *shape).requires_grad_()
                p.grad = self.grad[:, at:at + n].view(L, *shape)
                out.append(p)
                at += n
        self._numpy_layers = [(w.detach().numpy(), b.detach().numpy()) for w, b in zip(self.weights, self.biases)]

    def __getstate__(self) -> dict:
        """Pickled as its parameters (the views, gradient and activations are rebuilt from them)."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("activation", "numpy_activation", "grad", "weights", "biases", "_numpy_layers")}

    def __copy__(self) -> StackedMLP:
        """A shallow copy sharing every buffer (``take`` rebinds it to its own), not a pickle round trip."""
        part = StackedMLP.__new__(StackedMLP)
        part.__dict__.update(self.__dict__)
        return part

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.activation = ACTIVATIONS[self.activation_name]
        self.numpy_activation = NUMPY_ACTIVATIONS[self.activation_name]
        self._bind()  # gradients are zero between steps: LaneAdam clears them, the kernels never fill them

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

    def numpy_forward(self, x: np.ndarray) -> np.ndarray:
        """The same forward without autograd, in numpy views of the weights: ``x`` [L, B, in].

        Acting runs it every env step on one row per lane, where numpy's batched matmul and tanh
        are 1.3–1.9× faster than torch's (64–256 lanes).
        """
        last = len(self._numpy_layers) - 1
        for i, (w, b) in enumerate(self._numpy_layers):
            x = np.matmul(x, w)
            x += b
            if i < last:
                self.numpy_activation(x)
        return x

    def lane_state(self, lane: int) -> dict[str, torch.Tensor]:
        return {f"layer{i}.{kind}": p[lane].detach().clone()
                for i, pair in enumerate(zip(self.weights, self.biases)) for kind, p in zip(("weight", "bias"), pair)}

    def lane_module(self, lane: int) -> nn.Sequential:
        """Lane ``lane``'s network as a standalone ``sequential`` module: its weights copied,
        transposed to ``nn.Linear``'s [out, in] (exact: a copy changes no bit)."""
        sizes = [fan_in for (fan_in, _), _ in self.shapes] + [self.shapes[-1][0][1]]
        module = sequential(sizes, self.activation_name)
        linears = [layer for layer in module if isinstance(layer, nn.Linear)]
        with torch.no_grad():
            for linear, w, b in zip(linears, self.weights, self.biases):
                linear.weight.copy_(w[lane].T)
                linear.bias.copy_(b[lane, 0])
        return module

    def load_lane_state(self, lane: int, state: Mapping[str, torch.Tensor | np.ndarray]) -> None:
        with torch.no_grad():
            for i, pair in enumerate(zip(self.weights, self.biases)):
                for kind, p in zip(("weight", "bias"), pair):
                    p[lane].copy_(torch.as_tensor(state[f"layer{i}.{kind}"]))

    def keep(self, rows: torch.Tensor) -> None:
        """Drop every lane not in ``rows`` (retired runs stop costing compute)."""
        self.data = self.data[rows].clone()
        self._bind()

    def take(self, rows: torch.Tensor) -> StackedMLP:
        """A stack of copies of ``rows``' lanes, for work on a few lanes of a large stack: its
        backward fills a gradient of ``len(rows)`` lanes, not a zeroed gradient of every lane."""
        part = copy.copy(self)
        part.data = self.data[rows]
        part._bind()
        return part

    def put(self, rows: torch.Tensor, part: StackedMLP) -> None:
        """Write the lanes of ``part`` (from ``take(rows)``) back."""
        self.data[rows] = part.data


class LaneAdam:
    """Adam over a stacked network, kept per lane: every lane has its own step count (so its own
    bias correction), and a lane left out of an update is not touched at all, exactly as if each
    lane had its own ``torch.optim.Adam``.

    One ``torch.optim.Adam`` over the stacked tensors would move a waiting lane through its
    momentum; one with a parameter per lane spends more time in per-parameter bookkeeping than
    in the update. So the state lives in flat ``[L, N]`` buffers and each step hands row views
    of them straight to torch's fused Adam kernel (``torch._fused_adam_``, the one
    ``torch.optim.Adam(fused=True)`` runs; a test holds the result to ``torch.optim.Adam``).
    """

    def __init__(self, net: StackedMLP, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.net, self.lr, self.betas, self.eps = net, lr, betas, eps
        self.exp_avg = torch.zeros_like(net.data)
        self.exp_avg_sq = torch.zeros_like(net.data)
        self.steps = torch.zeros(net.data.shape[0])
        self._rows: tuple[list[bool], list[list[torch.Tensor]]] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_rows": None}  # row views are rebuilt on the next step

    def step(self, mask: torch.Tensor) -> None:
        """One Adam step for the lanes where ``mask`` is true; gradients are then cleared."""
        flags = mask.tolist()
        if self._rows is None or self._rows[0] != flags:  # row views cost more than the step
            lanes = [lane for lane, on in enumerate(flags) if on]
            buffers = (self.net.data, self.net.grad, self.exp_avg, self.exp_avg_sq, self.steps)
            self._rows = flags, [[buffer[lane] for lane in lanes] for buffer in buffers]
        params, grads, exp_avgs, exp_avg_sqs, steps = self._rows[1]
        if params:
            self.steps[mask] += 1
            beta1, beta2 = self.betas
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=self.lr, beta1=beta1,
                               beta2=beta2, weight_decay=0.0, eps=self.eps, amsgrad=False, maximize=False)
        self.net.grad.zero_()

    def keep(self, rows: torch.Tensor) -> None:
        """Follow ``StackedMLP.keep``: the kept lanes carry their Adam state along."""
        self.exp_avg, self.exp_avg_sq, self.steps = self.exp_avg[rows], self.exp_avg_sq[rows], self.steps[rows]
        self._rows = None

    def take(self, rows: torch.Tensor, part: StackedMLP) -> LaneAdam:
        """The Adam state of ``rows`` over ``part`` (``net.take(rows)``), to step those lanes alone."""
        sub = copy.copy(self)
        sub.net, sub._rows = part, None
        sub.keep(rows)
        return sub

    def put(self, rows: torch.Tensor, sub: LaneAdam) -> None:
        """Write the state of ``sub`` (from ``take(rows, …)``) back; row views stay valid."""
        self.exp_avg[rows], self.exp_avg_sq[rows], self.steps[rows] = sub.exp_avg, sub.exp_avg_sq, sub.steps


def clip_per_lane(nets: Sequence[StackedMLP], max_norm: float) -> None:
    """Scale each lane's gradient (over all ``nets`` jointly) to norm ≤ ``max_norm``."""
    with torch.no_grad():
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(net.grad, dim=1) for net in nets]),
                                        dim=0).unsqueeze(1)
        scale = (max_norm / (norm + 1e-6)).clamp_(max=1.0)
        for net in nets:
            net.grad.mul_(scale)
