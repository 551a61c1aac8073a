"""A run's device models: stored compactly per device, trained as one batched model with the weights
stacked on a leading device axis.

Like the RL lanes, the training devices step together: one vmapped forward pass, one backward pass.
The summed loss has no cross-device terms, so each device gets exactly its own gradient and
plain SGD on the stack equals independent per-device SGD (tested). Measured here with one
thread, 10 devices × batch 32: digits MLP 0.9 ms per step vs 3.7 ms for a per-device loop;
MNIST CNN 85 ms vs 98 ms.
"""
from __future__ import annotations

import copy
import json
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.nn.utils import parameters_to_vector, vector_to_parameters


class DeviceStack:
    """Copies of ``template``'s architecture, one row per device of ``ids``, weights stacked on a
    leading device axis: the devices that train together in one batched step."""

    def __init__(self, template: nn.Module, ids: Sequence[int], params: list[torch.Tensor] | None = None) -> None:
        """``params``: the stacked weights, one tensor per parameter with the device axis first
        (default: ``template``'s for every device)."""
        self.template = template
        self.ids = list(ids)
        self.names = [name for name, _ in template.named_parameters()]
        if params is None:
            params = [p.detach().unsqueeze(0).repeat(len(self.ids), *([1] * p.dim())) for p in template.parameters()]
        self.params = [p.requires_grad_() for p in params]
        self._forward = vmap(self._forward_one)

    def _forward_one(self, params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.template, dict(zip(self.names, params)), (x,))

    @property
    def devices(self) -> int:
        return self.params[0].shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [devices, batch, classes] of inputs [devices, batch, ...]: device d sees x[d]."""
        return self._forward(self.params, x)

    def sgd_step(self, loss: torch.Tensor, lr: float) -> None:
        """One plain SGD step of every device on ``loss`` (a sum of per-device losses)."""
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            for p, g in zip(self.params, grads):
                p.sub_(g, alpha=lr)

    def flat(self, row: int) -> torch.Tensor:
        """Row ``row``'s weights as one float32 vector, in ``parameters()`` order."""
        return torch.cat([p[row].detach().reshape(-1) for p in self.params])


class DeviceModels:
    """Every device's weights, one float32 vector each in ``parameters()`` order (the order of
    ``torch.nn.utils.parameters_to_vector`` on a standalone model), for the devices of ``ids`` (all
    of a run's devices in process; a Flower node holds only its own).

    Stored copy-on-write: vectors are never changed in place, so devices holding the same weights
    share one vector: at first the initial model, then each broadcast they downloaded. Only the
    devices that trained since their last download hold weights of their own, so memory grows with
    the devices that trained (at most participants × rounds), not with the total devices (#44)."""

    def __init__(self, template: nn.Module, ids: Sequence[int]) -> None:
        self.template = template
        self.ids = list(ids)
        self._rows = {device: row for row, device in enumerate(self.ids)}
        initial = parameters_to_vector(template.parameters()).detach().clone()
        self._vectors = [initial] * len(self.ids)
        self._last_loaded = initial

    def row(self, device: int) -> int:
        """The row of device ``device`` (its index in ``ids``)."""
        return self._rows[device]

    def stack(self, rows: Sequence[int]) -> DeviceStack:
        """The given rows' devices as one batched stack of copies of their weights, to train only
        those devices (a round's participants); ``put_back`` stores the trained weights."""
        vectors = torch.stack([self._vectors[r] for r in rows])
        params, start = [], 0
        for p in self.template.parameters():
            params.append(vectors[:, start:start + p.numel()].reshape(len(rows), *p.shape).clone())
            start += p.numel()
        return DeviceStack(self.template, [self.ids[r] for r in rows], params)

    def put_back(self, part: DeviceStack) -> None:
        """Store the weights of ``part``'s devices (a ``stack`` of these)."""
        for row, device in enumerate(part.ids):
            self._vectors[self.row(device)] = part.flat(row)

    def flat(self, device: int) -> np.ndarray:
        """Device ``device``'s weights as one float32 vector (a copy)."""
        return self._vectors[self.row(device)].numpy().copy()

    def load_flat(self, device: int, vector: np.ndarray) -> None:
        """Device ``device`` takes ``vector`` (as produced by ``flat``) as its weights; consecutive
        loads of bitwise the same vector (a broadcast) share one copy."""
        values = torch.tensor(np.asarray(vector, dtype=np.float32))
        if not torch.equal(values.view(torch.int32), self._last_loaded.view(torch.int32)):
            self._last_loaded = values
        self._vectors[self.row(device)] = self._last_loaded

    def stored_vectors(self) -> int:
        """How many distinct weight vectors are held (what the memory grows with)."""
        return len({id(v) for v in self._vectors})

    def module(self, device: int) -> nn.Module:
        """A standalone copy of device ``device``'s model (for evaluation or per-device work)."""
        model = copy.deepcopy(self.template)
        vector_to_parameters(self._vectors[self.row(device)].clone(), model.parameters())
        return model


class BatchStream:
    """Each device walks through its own data in freshly shuffled epochs, with its own RNG."""

    def __init__(self, parts: list[np.ndarray], seeds: list[int]) -> None:
        self.parts = parts
        self.rngs = [np.random.default_rng(s) for s in seeds]
        self.buffers = [np.empty(0, dtype=np.int64) for _ in parts]

    def take(self, iterations: int, batch: int, rows: Sequence[int] | None = None) -> np.ndarray:
        """Pool indices [iterations, len(rows), batch] for the next ``iterations`` local steps of
        ``rows`` (default all); the other rows' streams stay where they are."""
        need = iterations * batch
        out = []
        for d in range(len(self.parts)) if rows is None else rows:
            chunks = [self.buffers[d]]
            have = chunks[0].size
            while have < need:
                chunks.append(self.rngs[d].permutation(self.parts[d]))
                have += self.parts[d].size
            stream = np.concatenate(chunks)
            out.append(stream[:need])
            self.buffers[d] = stream[need:]
        return np.stack(out).reshape(len(out), iterations, batch).transpose(1, 0, 2)

    def snapshot(self, row: int) -> dict[str, np.ndarray]:
        """Row ``row``'s position in its data: the RNG state (as JSON bytes) and the unused rest of
        the current epoch; ``restore`` puts it back (a Flower node between messages)."""
        state = json.dumps(self.rngs[row].bit_generator.state).encode()
        return {"stream_rng": np.frombuffer(state, np.uint8), "stream_buffer": self.buffers[row]}

    def restore(self, row: int, arrays: Mapping[str, np.ndarray]) -> None:
        self.rngs[row].bit_generator.state = json.loads(arrays["stream_rng"].tobytes())
        self.buffers[row] = np.asarray(arrays["stream_buffer"], dtype=np.int64)
