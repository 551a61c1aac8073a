"""Server side of FedDualMatch and FedDM: global gradient matching, fine-tuning, radius R_t.

FedDualMatch [FedDualMatch, OpenReview: the authors' response to Q2.1]: starting from S'_k = S_k, update every S'_k
so that, class by class, the global model's gradients on S'_k align with its gradients on the
union S = ∪ S_k; then fine-tune the global model on ∪{S'_k, S_k} for T_g epochs; then compute
the error-ball radius R for the clients' next round. FedDM: train the global model on ∪ S_k,
radius fixed at ρ = 5.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, replace
from typing import Iterator, Sequence, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from frd.classification.distillation.client import (
    PRESETS,
    SCALES,
    SyntheticSet,
    consecutive_starts,
    convnet_layer_outputs,
    sgd_step,
    stacked_parameters,
)
from frd.classification.distillation.convnet_grads import ConvNetGradients, fused_plan
from frd.classification.models import ConvNet
from frd.errors import FrdError

GRADIENT_EPS = 1e-6
"""Added to the product of row norms in the cosine, as in Dataset Condensation's code."""


@dataclass(frozen=True)
class ServerConfig:
    """How the server turns the uploaded synthetic sets into the next global model.

    gradient_matching: global gradient matching first (FedDualMatch [FedDualMatch, OpenReview]) or not
        (FedDM [Xiong et al. 2023]).
    match_iterations: S'_k updates [our choice, CPU: 2; ``paper``: 10, Dataset Condensation's outer
        loop for IPC 10 — the FedDualMatch source gives no count].
    match_lr, match_momentum: SGD on S'_k [Dataset Condensation: 0.1 and 0.5].
    match_model_steps: SGD steps of the matching model on S between S'_k updates [our choice, CPU: 1;
        ``paper``: 50, Dataset Condensation's inner loop for IPC 10].
        The FedDualMatch source's Assumption 4 asks the gradients to agree along the trajectory of training on
        S, so the model follows it (0 keeps it at w_t), with ``finetune_lr`` and mini-batches of
        ``finetune_batch``; the global model itself is not changed.
    finetune_epochs: T_g [named by FedDualMatch, OpenReview, without a value; our choice, CPU: 50; ``paper``: 300,
        Dataset Condensation's training on synthetic data].
    finetune_batch, finetune_lr, finetune_momentum, finetune_weight_decay: SGD on the synthetic
        data [Dataset Condensation / DM: 256, 0.01, 0.9, 5e-4].
    radius: fixed error-ball radius (FedDM: ρ = 5 [our reading of Xiong et al. 2023]), or None for FedDualMatch's
        adaptive R_t [FedDualMatch, OpenReview].
    initial_radius: R for the first round, before any synthetic set exists [our choice: FedDM's ρ = 5].
    radius_steps, radius_lr, radius_batch: plain SGD steps behind R_t's model updates, their
        rate and mini-batch size [our choice, CPU: 5, 0.01, 64; ``paper``: 10, 0.01, 256; the FedDualMatch source
        gives none]. One batch size for S_k and S, so both updates carry the same SGD noise.
    """

    gradient_matching: bool = True
    match_iterations: int = 2
    match_lr: float = 0.1
    match_momentum: float = 0.5
    match_model_steps: int = 1
    finetune_epochs: int = 50
    finetune_batch: int = 256
    finetune_lr: float = 0.01
    finetune_momentum: float = 0.9
    finetune_weight_decay: float = 5e-4
    radius: float | None = None
    initial_radius: float = 5.0
    radius_steps: int = 5
    radius_lr: float = 0.01
    radius_batch: int = 64

    def __post_init__(self) -> None:
        counts = {"match_iterations": self.match_iterations, "match_model_steps": self.match_model_steps,
                  "finetune_epochs": self.finetune_epochs, "radius_steps": self.radius_steps}
        for name, value in counts.items():
            if value < 0:
                raise FrdError(f"{name} must be >= 0, got {value}")
        for name, value in (("finetune_batch", self.finetune_batch), ("radius_batch", self.radius_batch)):
            if value < 1:
                raise FrdError(f"{name} must be >= 1, got {value}")
        rates = {"match_lr": self.match_lr, "finetune_lr": self.finetune_lr, "radius_lr": self.radius_lr}
        for name, rate in rates.items():
            if not rate > 0:
                raise FrdError(f"{name} must be > 0, got {rate}")
        for name, radius in (("radius", self.radius), ("initial_radius", self.initial_radius)):
            if radius is not None and not radius >= 0:
                raise FrdError(f"{name} must be >= 0, got {radius}: error-ball radii are lengths")

    @property
    def first_radius(self) -> float:
        """The error-ball radius the clients use in the first round."""
        return self.radius if self.radius is not None else self.initial_radius

    @classmethod
    def preset(cls, method: str, scale: str = "cpu") -> "ServerConfig":
        """The server settings of ``method`` (feddualmatch | feddm) at ``scale`` (cpu | paper).

        The FedDualMatch source states none of the server's counts; ``paper`` takes Dataset Condensation's
        (see the fields), so treat it as the published *scale*, not the authors' values.
        """
        if method not in PRESETS or scale not in SCALES:
            raise FrdError(f"no server preset for method={method!r}, scale={scale!r}: "
                           f"methods {PRESETS}, scales {SCALES}")
        base = cls() if scale == "cpu" else cls(match_iterations=10, match_model_steps=50, finetune_epochs=300,
                                                radius_steps=10, radius_batch=256)
        return base if method == "feddualmatch" else replace(base, gradient_matching=False, radius=5.0)


def matched_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Weight tensors (≥ 2 dims): biases and normalisation parameters are not matched."""
    return [p for p in model.parameters() if p.dim() >= 2]


def gradient_distance(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ over layers and output rows of 1 − cos(row of a, row of b) (Dataset Condensation).

    A tensor of shape (out, …) is read as ``out`` rows; tensors of fewer than 2 dims (biases,
    normalisation parameters) contribute nothing.
    """
    if len(a) != len(b):
        raise ValueError(f"gradient lists differ in length: {len(a)} vs {len(b)}")
    return _row_cosine_distance(a, b, row_dim=1)


def _row_cosine_distance(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], row_dim: int) -> torch.Tensor:
    """Σ of 1 − cos over the rows of each pair of tensors, a row being everything from ``row_dim``
    on; tensors with no such rows (biases, normalisation parameters) contribute nothing."""
    total = torch.zeros(())
    for x, y in zip(a, b):
        if x.dim() < row_dim + 1:
            continue
        x, y = x.flatten(row_dim), y.flatten(row_dim)
        cos = (x * y).sum(row_dim) / (x.norm(dim=row_dim) * y.norm(dim=row_dim) + GRADIENT_EPS)
        total = total + (1 - cos).sum()
    return total


def class_gradients(model: nn.Module, images: torch.Tensor, label: int,
                    create_graph: bool = False) -> list[torch.Tensor]:
    """Gradients of the mean cross-entropy of ``images`` (all of class ``label``) w.r.t. the weights."""
    targets = torch.full((images.shape[0],), label, dtype=torch.long, device=images.device)
    loss = F.cross_entropy(_logits(model, images, fused=not create_graph), targets)
    return list(torch.autograd.grad(loss, matched_parameters(model), create_graph=create_graph))


def union(sets: Sequence[SyntheticSet]) -> tuple[torch.Tensor, torch.Tensor]:
    """Images and labels of all sets together."""
    if not sets:
        raise ValueError("no synthetic set arrived this round: the server has nothing to train on")
    return torch.cat([s.images for s in sets]), torch.cat([s.labels for s in sets])


def gradient_match(model: nn.Module, client_sets: Sequence[SyntheticSet], iterations: int, lr: float,
                   generator: torch.Generator, momentum: float = 0.5, model_steps: int = 1,
                   model_lr: float = 0.01, batch: int = 256) -> list[SyntheticSet]:
    """Global gradient matching: S'_k, one per client, started at S_k.

    Each iteration sums, over clients k and classes c of S_k, the distance between the
    gradients on S'_k's class-c images and on all of S's class-c images, and takes one SGD step
    on every S'_k. A working copy of ``model`` then takes ``model_steps`` SGD steps on S
    (mini-batches of ``batch`` drawn with ``generator``); ``model`` is left unchanged.

    All (client, class) groups of S' hold the same number of images (the IPC), so their
    gradients come from one batched (vmapped) pass over per-group copies of the weights rather
    than one small pass per group; the sum is the same (tested against the per-group loop).
    """
    images, labels = union(client_sets)
    work = copy.deepcopy(model).train()
    synthetic = [s.images.clone().requires_grad_(True) for s in client_sets]
    optimizer = torch.optim.SGD(synthetic, lr=lr, momentum=momentum)
    batches = _shuffled_batches(images.shape[0], batch, generator)
    classes = sorted({c for s in client_sets for c in s.classes})
    group_classes = [c for s in client_sets for c in s.classes]
    batched = len({s.ipc for s in client_sets}) == 1
    for _ in range(iterations):
        targets = {c: [g.detach() for g in class_gradients(work, images[labels == c], c)] for c in classes}
        if batched:
            groups = torch.cat(synthetic).unflatten(0, (len(group_classes), client_sets[0].ipc))
            stacked = [torch.stack([targets[c][j] for c in group_classes]) for j in range(len(targets[classes[0]]))]
            loss = batched_gradient_distance(group_gradients(work, groups, group_classes), stacked)
        else:
            loss = cast(torch.Tensor, sum(gradient_distance(class_gradients(work, x, c, create_graph=True), targets[c])
                                          for s, syn in zip(client_sets, synthetic)
                                          for c, x in zip(s.classes, syn.split(s.ipc))))
        grads = torch.autograd.grad(loss, synthetic)
        for syn, grad in zip(synthetic, grads):
            syn.grad = grad
        optimizer.step()
        _sgd(work, images, labels, itertools.islice(batches, model_steps), model_lr)
    return [SyntheticSet(syn.detach(), s.classes) for s, syn in zip(client_sets, synthetic)]


def group_gradients(model: nn.Module, groups: torch.Tensor, labels: Sequence[int]) -> list[torch.Tensor]:
    """:func:`class_gradients` (with ``create_graph``) of every group at once: weight gradients [G, ...].

    ``groups`` is [G, n, ...]: group g is n images of class ``labels[g]``. Each group runs through
    its own copy of the weights in one vmapped pass; since group g's loss depends only on copy
    g, the gradient of the summed loss w.r.t. copy g is exactly group g's own gradient.
    """
    named = dict(model.named_parameters())
    matched = [name for name, p in named.items() if p.dim() >= 2]
    shared = {name: p for name, p in named.items() if name not in matched}
    copies = [named[name].detach().unsqueeze(0).repeat(groups.shape[0], *([1] * named[name].dim())).requires_grad_()
              for name in matched]
    targets = torch.tensor(list(labels), dtype=torch.long, device=groups.device)
    targets = targets.unsqueeze(1).expand(-1, groups.shape[1])

    logits = _Logits(model)

    def loss(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        params = {f"model.{name}": p for name, p in {**shared, **dict(zip(matched, weights))}.items()}
        return F.cross_entropy(functional_call(logits, params, (x,)), y)

    losses = vmap(loss)(copies, groups, targets)
    return list(torch.autograd.grad(losses.sum(), copies, create_graph=True))


def batched_gradient_distance(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ over groups of :func:`gradient_distance`, for gradients stacked on a leading group axis."""
    return _row_cosine_distance(a, b, row_dim=2)


def finetune(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, epochs: int, batch: int,
             lr: float, generator: torch.Generator, momentum: float = 0.9,
             weight_decay: float = 5e-4) -> None:
    """Train ``model`` in place for ``epochs`` shuffled passes of mini-batch SGD on cross-entropy."""
    if epochs < 0 or batch < 1:
        raise ValueError(f"need epochs >= 0 and batch >= 1, got epochs={epochs}, batch={batch}")
    steps = epochs * -(-images.shape[0] // batch)
    _sgd(model, images, labels, itertools.islice(_shuffled_batches(images.shape[0], batch, generator), steps),
         lr, momentum, weight_decay)


def adaptive_radius(model: nn.Module, client_sets: Sequence[SyntheticSet], steps: int, lr: float,
                    batch: int, generator: torch.Generator) -> float:
    """R = max over clients k of ‖Δ_k − Δ_S‖, over all parameters jointly [FedDualMatch, OpenReview].

    Δ_k is the update of ``steps`` plain SGD steps from ``model`` on S_k, Δ_S the same on the
    union S; both start from the same weights, so ‖Δ_k − Δ_S‖ = ‖w_k − w_S‖. The copies draw
    their mini-batches from ``generator`` one after the other (S first), and train together
    (:func:`_trained_copies`).
    """
    images, labels = union(client_sets)
    data = [(images, labels), *((s.images, s.labels) for s in client_sets)]
    batches = [list(itertools.islice(_shuffled_batches(x.shape[0], batch, generator), steps)) for x, _ in data]
    trained = _trained_copies(model, data, batches, lr)
    return max(float(torch.sqrt(((w - trained[0]).double() ** 2).sum())) for w in trained[1:])


def server_update(model: nn.Module, client_sets: Sequence[SyntheticSet], config: ServerConfig,
                  generator: torch.Generator) -> float:
    """One server round: update ``model`` in place and return the radius for the next round.

    The adaptive radius is measured around the new global model [our choice: the FedDualMatch source says "trained
    from w_t"; the next round's ball is centred on the model the server just produced].
    """
    training = list(client_sets)
    if config.gradient_matching:
        training += gradient_match(model, client_sets, config.match_iterations, config.match_lr, generator,
                                   config.match_momentum, config.match_model_steps,
                                   config.finetune_lr, config.finetune_batch)
    images, labels = union(training)
    finetune(model, images, labels, config.finetune_epochs, config.finetune_batch, config.finetune_lr,
             generator, config.finetune_momentum, config.finetune_weight_decay)
    if config.radius is not None:
        return config.radius
    return adaptive_radius(model, client_sets, config.radius_steps, config.radius_lr,
                           config.radius_batch, generator)


def _logits(model: nn.Module, x: torch.Tensor, fused: bool = True) -> torch.Tensor:
    """``model(x)``; for the ConvNet through its faster equivalent (:func:`convnet_layer_outputs`;
    ``fused=False`` where gradients are differentiated again or the call is vmapped)."""
    return convnet_layer_outputs(model, x, fused)[-1] if type(model) is ConvNet else model(x)


class _Logits(nn.Module):
    """``_logits`` as a module, so that ``functional_call`` can swap the wrapped model's weights."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _logits(self.model, x, fused=False)


def _shuffled_batches(n: int, batch: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless mini-batch indices: one fresh permutation of range(n) per epoch."""
    while True:
        yield from torch.randperm(n, generator=generator).split(batch)


def _sgd(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batches: Iterator[torch.Tensor],
         lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
    """``torch.optim.SGD`` (a fresh one) over ``batches`` of cross-entropy, as one flat step per batch
    (:func:`sgd_step`): the model's parameters and gradients become views of two flat buffers.
    A fully fused ConvNet's gradients come without autograd, straight into the flat gradient
    (:class:`~frd.classification.distillation.convnet_grads.ConvNetGradients`, the same bits)."""
    model.train()
    weights, grads = _flat_parameters(model)
    momentum_buffer = torch.empty_like(weights)
    hyper = np.float32(lr), np.float32(momentum), np.float32(weight_decay)
    plan = fused_plan(model, images.shape[1:])
    walked = None if plan is None else ConvNetGradients(cast(ConvNet, model), plan)
    for step, idx in enumerate(batches):
        if walked is None:
            grads.zero_()
            F.cross_entropy(_logits(model, images[idx]), labels[idx]).backward()
        else:
            walked(images[idx], labels[idx])
        sgd_step(weights.numpy(), grads.numpy(), momentum_buffer.numpy(), *hyper, step == 0)


def _flat_parameters(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """One float32 buffer of all parameters and one of their gradients, the parameters and their
    ``.grad`` made views of them (same values), so that backward accumulates into the flat gradient."""
    params = list(model.parameters())
    if any(p.dtype != torch.float32 or p.device.type != "cpu" for p in params):
        raise ValueError("the server's SGD takes float32 CPU models")
    sizes = [p.numel() for p in params]
    weights = torch.cat([p.detach().reshape(-1) for p in params])
    grads = torch.zeros_like(weights)
    for p, w, g in zip(params, weights.split(sizes), grads.split(sizes)):
        p.data = w.view_as(p)
        p.grad = g.view_as(p)
    return weights, grads


def _trained_copies(model: nn.Module, data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                    batches: Sequence[Sequence[torch.Tensor]], lr: float) -> torch.Tensor:
    """The flat weights [G, P] of G copies of ``model``, copy g trained by plain SGD on its own
    ``data[g]``, one step per batch of ``batches[g]`` (all of one length).

    A ConvNet's copies train together: each step is one grouped pass (every copy's batch through
    its own weights, :func:`convnet_layer_outputs` with groups) and one update of all weights; the
    same steps as training the copies one by one, at a fraction of PyTorch's per-operation cost
    (tested). Other models train one by one.
    """
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    if type(model) is not ConvNet or flat.dtype != torch.float32 or flat.device.type != "cpu":
        copies = []
        for (x, y), own in zip(data, batches):
            trained = copy.deepcopy(model)
            _sgd(trained, x, y, iter(own), lr)
            copies.append(torch.cat([p.detach().reshape(-1) for p in trained.parameters()]))
        return torch.stack(copies)
    weights = flat.repeat(len(data), 1).requires_grad_()
    none = np.empty(0, np.float32)
    model.train()
    for step in range(len(batches[0])):
        picks = [own[step] for own in batches]
        x = torch.cat([images[i] for (images, _), i in zip(data, picks)])
        sizes = [i.numel() for i in picks]
        stacked = stacked_parameters(weights, [p.shape for p in params])
        logits = convnet_layer_outputs(cast(ConvNet, model), x, weights=stacked, starts=consecutive_starts(sizes))[-1]
        loss = cast(torch.Tensor, sum(F.cross_entropy(out, labels[i])
                                      for out, (_, labels), i in zip(logits.split(sizes), data, picks)))
        (grad,) = torch.autograd.grad(loss, weights)
        sgd_step(weights.detach().view(-1).numpy(), grad.view(-1).numpy(), none, np.float32(lr), np.float32(0.0),
                 np.float32(0.0), True)
    return weights.detach()
