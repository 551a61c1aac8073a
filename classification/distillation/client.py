"""Client side of FedDualMatch and FedDM: local distribution matching [FedDualMatch, OpenReview; Xiong et al. 2023].

A client turns its real images into a small synthetic set S_k (``ipc`` images for every class
it holds) whose per-class mean features match those of its real data under models drawn
around the global model. Neither paper has public code; every choice the seed leaves open is
a named field of :class:`DistillConfig` and is marked [our choice] in its documentation.

The model is any ``torch.nn.Module`` with ``layer_outputs(x) -> list[Tensor]``: the outputs
of its J - 1 feature blocks in order, then the logits (J layers in all).
"""
from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Literal, Sequence, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from frd.classification.distillation.dense_conv import DENSE_MAP, dense_matrix
from frd.classification.distillation.dp import DPConfig, clip_and_noise
from frd.classification.distillation.first_block import FEW_CHANNELS, first_block
from frd.classification.distillation.norm_block import channels_last, norm_relu_pool
from frd.classification.models import ConvNet
from frd.errors import FrdError
from frd.jit import JIT, compiled
from frd.payload import FLOAT_BITS, Payload, index_bits

Init = Literal["noise", "real"]
Matching = Literal["layerwise", "last"]
PRESETS = ("feddualmatch", "feddm")
SCALES = ("cpu", "paper")


@dataclass(frozen=True)
class DistillConfig:
    """How a client distils its data each round.

    ipc: synthetic images per class [FedDualMatch, OpenReview: 10].
    iterations: image updates per round [our choice, CPU: 30; ``paper``: DM's 20,000 — neither
        source states FedDualMatch's or FedDM's count].
    real_batch: real images drawn per class per iteration [our choice, CPU: 16; ``paper``: DM's 256].
    image_lr, image_momentum: SGD on the images [DM (Zhao & Bilen 2023): 1.0 and 0.5].
    init: ``noise`` = N(0, 1) in the model's input space (normalised pixels), FedDualMatch
        [FedDualMatch, OpenReview]; ``real`` = random real images of the class, FedDM
        [FedDualMatch, OpenReview: "FedDM uses real data to generate synthetic images"].
    matching: ``layerwise`` = FedDualMatch's backward stages over all J layers [FedDualMatch, OpenReview];
        ``last`` = last feature layer + logits, FedDM [Xiong et al. 2023].
    dp: the Gaussian mechanism on the image gradient (:mod:`frd.classification.distillation.dp`), or None.
    """

    ipc: int = 10
    iterations: int = 30
    real_batch: int = 16
    image_lr: float = 1.0
    image_momentum: float = 0.5
    init: Init = "noise"
    matching: Matching = "layerwise"
    dp: DPConfig | None = None

    def __post_init__(self) -> None:
        if self.ipc < 1:
            raise FrdError(f"IPC (images per class) must be >= 1, got {self.ipc}: e.g. ipc=10")
        if self.iterations < 0:
            raise FrdError(f"distillation iterations must be >= 0, got {self.iterations}")
        if self.real_batch < 1:
            raise FrdError(f"real_batch must be >= 1 image per class, got {self.real_batch}")
        if not self.image_lr > 0:
            raise FrdError(f"image_lr must be > 0, got {self.image_lr}")
        if not 0 <= self.image_momentum < 1:
            raise FrdError(f"image_momentum must lie in [0, 1), got {self.image_momentum}")
        if self.init not in ("noise", "real"):
            raise FrdError(f"unknown init {self.init!r}: use 'noise' (FedDualMatch) or 'real' (FedDM)")
        if self.matching not in ("layerwise", "last"):
            raise FrdError(f"unknown matching {self.matching!r}: use 'layerwise' (FedDualMatch) "
                           "or 'last' (FedDM)")
        if self.dp is not None and self.init == "real":
            raise FrdError("DP with init='real' would upload real images as the starting point: "
                           "use init='noise' with dp, or dp=None")

    @classmethod
    def preset(cls, method: str, scale: str = "cpu") -> "DistillConfig":
        """The client settings of ``method`` (feddualmatch | feddm) at ``scale`` (cpu | paper).

        ``paper``: IPC 10 is the FedDualMatch source's; the iteration count and real batch are DM's, since the
        seed gives neither. (Its 10 clients, 20 rounds and 128-channel ConvNet belong to the
        round loop and the model, not to this config.)
        """
        if method not in PRESETS or scale not in SCALES:
            raise FrdError(f"no client preset for method={method!r}, scale={scale!r}: "
                           f"methods {PRESETS}, scales {SCALES}")
        base = cls() if scale == "cpu" else cls(iterations=20_000, real_batch=256)
        return base if method == "feddualmatch" else replace(base, init="real", matching="last")


@dataclass(frozen=True)
class SyntheticSet:
    """A client's synthetic images, ``ipc`` per class, grouped by class in ``classes`` order.

    Only classes the client holds are distilled: a class with no real image has nothing to
    match, and uploading noise labelled with it would teach the server noise.
    """

    images: torch.Tensor
    classes: tuple[int, ...]

    @property
    def ipc(self) -> int:
        return self.images.shape[0] // len(self.classes)

    @property
    def labels(self) -> torch.Tensor:
        """Implied by the layout: ``ipc`` copies of each class in order."""
        return torch.tensor(self.classes, dtype=torch.long).repeat_interleave(self.ipc)

    def to_payload(self, num_classes: int) -> Payload:
        """Images as float32 and the class list as indices of ``ceil(log2(num_classes))`` bits.

        Labels are not sent: the server rebuilds them from the class list and the layout.
        """
        return Payload.of("synthetic", self.images.shape[0],
                          images=(self.images.detach().cpu().numpy().astype(np.float32), FLOAT_BITS),
                          classes=(np.asarray(self.classes, dtype=np.int64), index_bits(num_classes)))

    @classmethod
    def from_payload(cls, payload: Payload) -> "SyntheticSet":
        return cls(torch.from_numpy(np.array(payload["images"])),
                   tuple(int(c) for c in payload["classes"]))


def sample_model_on_error_ball(global_model: nn.Module, radius: float,
                               generator: torch.Generator) -> nn.Module:
    """A frozen copy of ``global_model`` moved by exactly ``radius`` in a random direction.

    The direction is one Gaussian draw over *all* parameters jointly (weights, biases and
    normalisation parameters, in ``parameters()`` order, as one vector; buffers are left alone),
    scaled so that the parameter vector lies at L2 distance ``radius`` from the global one — a
    point on the sphere of the error ball [FedDualMatch, OpenReview: "random Gaussian direction scaled to radius R_t"].
    """
    if not radius >= 0:
        raise ValueError(f"error-ball radius must be >= 0, got {radius}: use a non-negative radius")
    model = copy.deepcopy(global_model)
    params = list(model.parameters())
    flat = torch.randn(sum(p.numel() for p in params), generator=generator, dtype=params[0].dtype,
                       device=generator.device)
    direction = [d.view_as(p) for p, d in zip(params, flat.split([p.numel() for p in params]))]
    norm = torch.sqrt(cast(torch.Tensor, sum((d.double() ** 2).sum() for d in direction)))
    with torch.no_grad():
        for p, d in zip(params, direction):
            p.add_((d * (radius / norm)).to(p.device))
            p.requires_grad_(False)
    return model


def mean_embedding_mmd(real: torch.Tensor, synthetic: torch.Tensor) -> torch.Tensor:
    """Squared distance between the mean feature vectors of two batches (Distribution Matching)."""
    return ((real.flatten(1).mean(0) - synthetic.flatten(1).mean(0)) ** 2).sum()


def stage_layers(num_layers: int, stage: int) -> list[int]:
    """Layers matched at FedDualMatch stage ``stage`` (0-based): the last ``stage + 1`` layers.

    Layers are 0-based, ``num_layers - 1`` being the logits. Stage 0 matches the logits alone;
    each later stage adds the next earlier layer (the FedDualMatch source's p = J, J-1, …, 1, loss
    Σ_{q=p..J} MMD_q), until the last stage matches every layer.
    """
    if num_layers < 1:
        raise ValueError(f"a model needs at least one layer to match, got num_layers={num_layers}")
    if not 0 <= stage < num_layers:
        raise ValueError(f"stage must lie in [0, {num_layers}) for {num_layers} layers, got {stage}")
    return list(range(num_layers - 1 - stage, num_layers))


def stage_of_iteration(iteration: int, iterations: int, num_layers: int) -> int:
    """Which stage iteration ``iteration`` of ``iterations`` belongs to [our choice].

    The FedDualMatch source does not say how iterations are shared: we give every stage an equal, contiguous
    share (stage = ⌊iteration · J / iterations⌋), so any remainder is spread one per stage and
    a run of fewer than J iterations skips some stages rather than rounding them all away.
    """
    return iteration * num_layers // iterations


def matched_layers(matching: Matching, num_layers: int, iteration: int, iterations: int) -> list[int]:
    """Layers whose MMD enters the loss at ``iteration`` under ``matching``."""
    if matching == "layerwise":
        return stage_layers(num_layers, stage_of_iteration(iteration, iterations, num_layers))
    if num_layers < 2:
        raise ValueError("FedDM matching needs a feature layer before the logits: the model's "
                       "layer_outputs must return at least two tensors")
    return [num_layers - 2, num_layers - 1]


def distribution_matching_loss(model: nn.Module, real: list[torch.Tensor],
                               synthetic: list[torch.Tensor], layers: list[int]) -> torch.Tensor:
    """Σ over classes c and matched layers q of MMD_q(real_c, synthetic_c).

    All classes go through the model in one batch each for real and synthetic images; this is
    exact for models whose output for one image does not depend on the others (instance norm,
    or batch norm in eval mode, which :func:`distill` uses).
    """
    with torch.no_grad():
        real_out = _layer_outputs(model, torch.cat(real))
    syn_out = _layer_outputs(model, torch.cat(synthetic))
    real_sizes, syn_sizes = [x.shape[0] for x in real], [x.shape[0] for x in synthetic]
    return cast(torch.Tensor, sum(mean_embedding_mmd(r, s) for q in layers
                                  for r, s in zip(real_out[q].split(real_sizes), syn_out[q].split(syn_sizes))))


def init_synthetic(real_by_class: list[torch.Tensor], ipc: int, init: Init,
                   generator: torch.Generator) -> torch.Tensor:
    """Starting images, class-major: N(0, 1) noise, or ``ipc`` random real images per class.

    With ``real`` init a class holding fewer than ``ipc`` images repeats them (drawn with
    replacement) [our choice].
    """
    if init == "noise":
        first = real_by_class[0]
        shape = (ipc * len(real_by_class), *first.shape[1:])
        return torch.randn(shape, generator=generator, device=generator.device).to(first)
    picks = []
    for x in real_by_class:
        if x.shape[0] >= ipc:
            picks.append(x[torch.randperm(x.shape[0], generator=generator)[:ipc]])
        else:
            picks.append(x[torch.randint(x.shape[0], (ipc,), generator=generator)])
    return torch.cat(picks).clone()


@dataclass(frozen=True)
class ClientData:
    """One client's share of a round of distillation: the global weights it holds, its real data
    (``images`` in the model's input space), its error-ball radius and its own random stream."""

    model: nn.Module
    images: torch.Tensor
    labels: torch.Tensor
    radius: float
    generator: torch.Generator


def distill(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, config: DistillConfig,
            radius: float, generator: torch.Generator) -> SyntheticSet:
    """One round of one client's distillation on its real ``images`` and ``labels``
    (:func:`distill_clients` of that client alone)."""
    return distill_clients([ClientData(model, images, labels, radius, generator)], config)[0]


def distill_clients(clients: Sequence[ClientData], config: DistillConfig) -> list[SyntheticSet]:
    """One round of distillation for several clients at once; each gets the set it would get alone.

    Each iteration draws a fresh model on the error ball of the client's radius around its model
    [our choice: once per iteration, as FedDM and DM redraw their network every iteration] and a fresh
    batch of ``config.real_batch`` real images per class (fewer when a class holds fewer), takes
    the matching loss of the current stage, optionally privatises its gradient, and steps the
    images. The client models themselves are never changed.

    Same draws and math as sampling with :func:`sample_model_on_error_ball` and taking
    :func:`distribution_matching_loss` (tested), but faster: the sampled weights are written
    into one working buffer instead of deep-copying the model every iteration; the ConvNet's
    images of all clients go through it in one pass with each client's weights
    (:func:`convnet_layer_outputs` with groups), so a round pays PyTorch's per-operation cost
    once per iteration rather than once per client and iteration; the class means of all
    clients and classes come from one reduction per layer. A client's arithmetic never mixes
    with another's (every kernel and reduction works client by client, or image by image, in a
    fixed order), so its set is bit for bit the one it gets alone (tested): a remote participant,
    which distils alone, uploads what the in-process run would.
    """
    if not clients:
        return []
    states = [_ClientState(c, config) for c in clients]
    balls = _ErrorBalls([c.model for c in clients], [c.radius for c in clients], [c.generator for c in clients])
    syn = torch.cat([s.syn for s in states]).requires_grad_(True)
    syn_starts = consecutive_starts([s.syn.shape[0] for s in states])
    momentum = torch.empty_like(syn)
    num_layers = len(_layer_outputs_no_grad(balls.models[0], states[0].images[:1]))
    class_offsets = consecutive_starts([len(s.classes) for s in states])
    real_segments = torch.cat([s.segments + offset for s, offset in zip(states, class_offsets)])
    real_sizes = torch.cat([torch.tensor(s.sizes) for s in states]).unsqueeze(1)
    real_starts = consecutive_starts([s.real_rows for s in states])
    for it in range(config.iterations):
        balls.draw()
        real = torch.cat([s.real_batch(config.real_batch) for s in states])
        layers = matched_layers(config.matching, num_layers, it, config.iterations)
        with torch.no_grad():
            real_out = balls.layer_outputs(real, real_starts)
            real_means = {q: _segment_means(real_out[q], real_segments, real_sizes) for q in layers}
        syn_out = balls.layer_outputs(syn, syn_starts)
        loss = sum(((syn_out[q].flatten(1).unflatten(0, (-1, config.ipc)).mean(1) - real_means[q]) ** 2).sum()
                   for q in layers)
        (grad,) = torch.autograd.grad(loss, syn)
        if config.dp is not None:
            for k, s in enumerate(states):
                part = grad[syn_starts[k]:syn_starts[k + 1]]
                part.copy_(clip_and_noise(part, config.dp.clip_norm, config.dp.noise, part.shape[0], s.generator))
        with torch.no_grad():
            sgd_step(syn.view(-1).numpy(), grad.reshape(-1).numpy(), momentum.view(-1).numpy(),
                     np.float32(config.image_lr), np.float32(config.image_momentum), np.float32(0.0), it == 0)
    return [SyntheticSet(syn[syn_starts[k]:syn_starts[k + 1]].detach().clone(), s.classes)
            for k, s in enumerate(states)]


class _ClientState:
    """A client's real data by class, its synthetic images and how it draws real batches."""

    def __init__(self, client: ClientData, config: DistillConfig) -> None:
        images, labels = client.images, client.labels
        if images.shape[0] != labels.shape[0] or images.shape[0] == 0:
            raise ValueError(f"need as many labels as images and at least one of each, got "
                             f"{images.shape[0]} images and {labels.shape[0]} labels")
        self.images = _row_major(images)
        self.classes = tuple(int(c) for c in torch.unique(labels))
        self.class_index = [torch.nonzero(labels == c).flatten() for c in self.classes]
        self.generator = client.generator
        self.syn = init_synthetic([self.images[i] for i in self.class_index], config.ipc, config.init, self.generator)
        self.sizes = [min(config.real_batch, i.numel()) for i in self.class_index]
        self.segments = torch.repeat_interleave(torch.arange(len(self.classes)), torch.tensor(self.sizes))
        self.real_rows = sum(self.sizes)

    def real_batch(self, per_class: int) -> torch.Tensor:
        """A fresh draw of up to ``per_class`` real images of every class, class by class."""
        return self.images[torch.cat([i[torch.randperm(i.numel(), generator=self.generator)[:per_class]]
                                      for i in self.class_index])]


@compiled(**dict(JIT, fastmath=False))
def sgd_step(p, grad, buf, lr, momentum, weight_decay, first):
    """One step of ``torch.optim.SGD`` (momentum without dampening, L2 weight decay) on flat float32
    arrays: d = grad + weight_decay·p; buf = d on the ``first`` step, else momentum·buf + d (d alone
    without momentum); p −= lr·buf. One pass instead of PyTorch's several per tensor, and element
    by element in a fixed way, so that an element's update does not depend on where it sits."""
    for i in range(p.size):
        d = grad[i] + weight_decay * p[i]
        if momentum != 0:
            d = d if first else buf[i] * momentum + d
            buf[i] = d
        p[i] = p[i] - lr * d


def stacked_parameters(weights: torch.Tensor, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    """Each parameter of K flat weight vectors ([K, P], parameters in order) as one [K, *shape] view,
    the weights that :func:`convnet_layer_outputs` takes with groups. Split, not sliced: when the
    buffer requires a gradient, a slice's backward would write a zero tensor of all of it per parameter."""
    parts = weights.split([math.prod(shape) for shape in shapes], dim=1)
    return [part.view(weights.shape[0], *shape) for part, shape in zip(parts, shapes)]


def consecutive_starts(sizes: Sequence[int]) -> list[int]:
    """Group boundaries of consecutive groups of ``sizes``: [0, s0, s0 + s1, …]."""
    return [0, *itertools.accumulate(sizes)]


class _ErrorBalls:
    """Draws every client's model on its error ball into one reusable [K, P] weight buffer.

    Client k's draw consumes its generator exactly as :func:`sample_model_on_error_ball` does
    (one Gaussian vector of all parameters) and writes the same weights (``centre + direction ·
    radius / ‖direction‖``, the norm summed in float64 in one fixed order rather than tensor by
    tensor), without copying the model. Row
    k of the buffer backs client k's working model (``models[k]``), and ``stacked`` holds each
    parameter of all clients as one [K, ...] view, which the grouped ConvNet pass reads.
    """

    def __init__(self, models: Sequence[nn.Module], radii: Sequence[float], generators: Sequence[torch.Generator]) -> None:
        for radius in radii:
            if not radius >= 0:
                raise ValueError(f"error-ball radius must be >= 0, got {radius}: use a non-negative radius")
        self.models = [copy.deepcopy(m).eval() for m in models]
        params = [list(m.parameters()) for m in self.models]
        shapes = [p.shape for p in params[0]]
        if any([p.shape for p in ps] != shapes for ps in params):
            raise ValueError("clients distilled together need models of one architecture")
        if any(p.dtype != torch.float32 or p.device.type != "cpu" for ps in params for p in ps):
            raise ValueError("error-ball sampling needs float32 CPU parameters")
        sizes = [p.numel() for p in params[0]]
        self.centre = torch.stack([torch.cat([p.detach().reshape(-1) for p in ps]) for ps in params])
        self.weights = self.centre.clone()
        self.direction = torch.empty_like(self.centre)
        for k, ps in enumerate(params):
            for p, flat in zip(ps, self.weights[k].split(sizes)):
                p.data = flat.view_as(p)
                p.requires_grad_(False)
        self.stacked = stacked_parameters(self.weights, shapes)
        self.radii = np.asarray(radii, dtype=np.float64)
        self.generators = list(generators)
        self.grouped = type(self.models[0]) is ConvNet

    @torch.no_grad()
    def draw(self) -> None:
        for direction, generator in zip(self.direction, self.generators):
            torch.randn(direction.shape, generator=generator, out=direction)
        _place_on_spheres(self.centre.numpy(), self.direction.numpy(), self.radii, self.weights.numpy())

    def layer_outputs(self, x: torch.Tensor, starts: Sequence[int]) -> list[torch.Tensor]:
        """Every layer's outputs of images ``starts[k]:starts[k + 1]`` under client k's drawn model."""
        if self.grouped:
            return convnet_layer_outputs(cast(ConvNet, self.models[0]), x, weights=self.stacked, starts=starts)
        parts = [_layer_outputs(m, part) for m, part in zip(self.models, x.split(_sizes(starts)))]
        return [torch.cat(layer) for layer in zip(*parts)]


@compiled(**dict(JIT, fastmath={"reassoc"}))
def _place_on_spheres(centre, direction, radii, out):
    """out[k] = centre[k] + direction[k] · radii[k] / ‖direction[k]‖, the norm summed in float64
    in index order and the scale rounded to float32 once, as PyTorch's ``direction * (r / norm)``."""
    for k in range(centre.shape[0]):
        total = 0.0
        for i in range(direction.shape[1]):
            total += np.float64(direction[k, i]) ** 2
        scale = np.float32(radii[k] / np.sqrt(total))
        for i in range(direction.shape[1]):
            out[k, i] = centre[k, i] + direction[k, i] * scale


def _row_major(x: torch.Tensor) -> torch.Tensor:
    """``x`` with plain row-major (NCHW) strides.

    A one-channel batch can be "contiguous" in both NCHW and NHWC at once (the dataset's pool
    tensors are): mkldnn's convolution then returns channels-last outputs, on which CPU group
    norm and pooling run several times slower (measured: group norm ~10x).
    """
    return x if x.is_contiguous() and x.stride() == _row_major_strides(x.shape) \
        else x.clone(memory_format=torch.contiguous_format)


def _row_major_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _segment_means(x: torch.Tensor, segments: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """Mean of the flattened rows of ``x`` per segment (row i in segment ``segments[i]``; ``sizes``
    [S, 1] the rows per segment). Each segment's rows are summed one after the other in row order,
    so its mean does not depend on the other segments."""
    flat = x.flatten(1)
    sums = torch.zeros(sizes.shape[0], flat.shape[1], dtype=flat.dtype, device=flat.device).index_add_(0, segments, flat)
    return sums / sizes.to(flat.dtype)


def _layer_outputs_no_grad(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    with torch.no_grad():
        return _layer_outputs(model, x)


def _layer_outputs(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    if type(model) is ConvNet:
        return convnet_layer_outputs(model, x)
    if not hasattr(model, "layer_outputs"):
        raise ValueError(f"{type(model).__name__} has no layer_outputs(x) method: distribution "
                       "matching needs each block's output and the logits")
    return list(cast(Any, model).layer_outputs(x))


def convnet_layer_outputs(model: ConvNet, x: torch.Tensor, fused: bool = True,
                          weights: Sequence[torch.Tensor] | None = None,
                          starts: Sequence[int] | None = None) -> list[torch.Tensor]:
    """``model.layer_outputs(x)`` with the same weights and math, in CPU-friendlier kernels.

    ``fused`` (first derivatives only; not under ``vmap``): channels-last maps; a first block
    reading few channels whole, image by image (:mod:`frd.classification.distillation.first_block`); each later
    block's instance norm, ReLU and 2×2 pool in one pass on even sides
    (:mod:`frd.classification.distillation.norm_block`); 3×3 convolutions of maps of at most ``DENSE_MAP`` pixels as
    one matrix product (:func:`_dense_conv`); a fine-tuning step of the digits ConvNet ~2.3× faster
    than with PyTorch's operators. Otherwise PyTorch's operators, with
    the 2×2 average pool, PyTorch's slowest step on these small NCHW maps (measured 4× slower
    forward and backward than the alternatives below), as one matrix product with a fixed
    pooling matrix on maps of at most 8×8, a sum of adjacent rows then columns on larger even
    maps, and ``avg_pool2d`` on odd sides; inputs get row-major strides (see :func:`_row_major`).
    Gradients flow to the input and to the model's parameters.

    Groups (fused path only): with ``weights`` (every parameter of ``model``, in its order, with
    a leading axis of K clients) and ``starts``, images ``starts[k]:starts[k + 1]`` go through
    client k's weights; ``model`` then only gives the architecture. Group k's outputs are those
    of its images alone under its weights, bit for bit (tested).
    """
    fused = fused and x.dtype == torch.float32 and x.device.type == "cpu"
    blocks = cast(nn.ModuleList, model.blocks)
    if not fused:
        if weights is not None:
            raise ValueError("per-client weights need the fused path (float32 CPU inputs, first derivatives)")
        return _plain_layer_outputs(model, x)
    if (weights is None) != (starts is None):
        raise ValueError("per-client weights and group starts go together")
    if weights is None:
        weights = [w for b in blocks for w in (cast(Any, b)[0].weight, cast(Any, b)[0].bias, cast(Any, b)[1].weight,
                                               cast(Any, b)[1].bias)]
        weights += [model.classifier.weight, model.classifier.bias]
    if len(weights) != 4 * len(blocks) + 2 or any(w is None for w in weights):
        raise ValueError("the fused pass needs every block's convolution bias and affine norm")
    bounds = None if starts is None else list(starts)
    x = channels_last(x)
    outputs = []
    for b, block in enumerate(blocks):
        conv, norm, _, pool = cast(Any, block)  # an nn.Sequential: conv, group norm, ReLU, pool
        conv_weight, conv_bias, gamma, beta = weights[4 * b:4 * b + 4]
        fused_norm = fused_norm_block(norm, pool, conv)
        kind = conv_kind(conv, fused_norm, x.shape)
        if kind == "first":
            x = first_block(x, conv_weight, conv_bias, gamma, beta, norm.eps, bounds)
            outputs.append(x)
            continue
        if kind == "dense":
            x = _dense_conv(x, conv_weight, conv_bias, bounds)
        else:
            x = _by_group(partial(F.conv2d, stride=conv.stride, padding=conv.padding), x, bounds, conv_weight, conv_bias)
        if fused_norm and _even(x):
            x = norm_relu_pool(x, gamma, beta, norm.eps, bounds)
        else:  # PyTorch's group norm and pooling run ~1.6× slower on channels-last maps
            x = _by_group(partial(_norm_pool, norm=norm, pool=pool), x, bounds, gamma, beta)
        outputs.append(x)
    outputs.append(_by_group(lambda xs, w, c: torch.addmm(c, xs.flatten(1), w.t()), x, bounds, *weights[-2:]))
    return outputs


def _plain_layer_outputs(model: ConvNet, x: torch.Tensor) -> list[torch.Tensor]:
    """``convnet_layer_outputs`` in PyTorch's operators (differentiable twice, vmappable)."""
    x = _row_major(x)
    outputs = []
    for block in cast(nn.ModuleList, model.blocks):
        conv, norm, _, pool = cast(Any, block)
        x = _norm_pool(F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding), norm.weight, norm.bias, norm, pool)
        outputs.append(x)
    outputs.append(model.classifier(x.flatten(1)))
    return outputs


def _norm_pool(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, norm: nn.GroupNorm,
               pool: nn.AvgPool2d) -> torch.Tensor:
    x = F.relu(F.group_norm(_row_major(x), norm.num_groups, gamma, beta, norm.eps))
    return _avg_pool_2x2(x) if pool.kernel_size == 2 and pool.stride == 2 and pool.padding == 0 else pool(x)


def _by_group(op: Callable[..., torch.Tensor], x: torch.Tensor, starts: Sequence[int] | None,
              *weights: torch.Tensor) -> torch.Tensor:
    """``op(images of group k, weights[...][k])`` of every group, concatenated; ``op(x, *weights)``
    when ``starts`` is None (weights without a group axis)."""
    if starts is None:
        return op(x, *weights)
    # split, not slicing: a slice's backward writes a zero tensor of all of x per group
    return torch.cat([op(part, *(w[k] for w in weights)) for k, part in enumerate(x.split(_sizes(starts)))])


def _sizes(starts: Sequence[int]) -> list[int]:
    """Group sizes from group boundaries (the inverse of :func:`consecutive_starts`)."""
    return [int(b - a) for a, b in zip(starts[:-1], starts[1:])]


def _even(x: torch.Tensor) -> bool:
    return x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0


def fused_norm_block(norm: nn.GroupNorm, pool: nn.AvgPool2d, conv: nn.Conv2d) -> bool:
    """Whether a block's norm and pool are instance norm and a plain 2×2 pool, which
    :func:`frd.classification.distillation.norm_block.norm_relu_pool` fuses (on even sides)."""
    plain_pool = pool.kernel_size == 2 and pool.stride == 2 and pool.padding == 0
    return plain_pool and norm.num_groups == conv.out_channels


def conv_kind(conv: nn.Conv2d, fused_norm: bool, shape: Sequence[int]) -> str:
    """How the fused pass runs a block's convolution of an [N, C, H, W] input: ``first`` (the
    whole block image by image, :mod:`frd.classification.distillation.first_block`), ``dense`` (one matrix
    product, :func:`_dense_conv`) or ``conv`` (oneDNN's convolution)."""
    channels, h, w = shape[1:]
    if fused_norm and _same_3x3(conv) and h % 2 == 0 and w % 2 == 0 and channels <= FEW_CHANNELS:
        return "first"
    return "dense" if _same_3x3(conv) and h * w <= DENSE_MAP else "conv"


def _same_3x3(conv: nn.Conv2d) -> bool:
    """A 3×3 convolution with padding 1, stride 1, no dilation or groups: the output keeps the map's size."""
    return (conv.kernel_size == (3, 3) and conv.padding == (1, 1) and conv.stride == (1, 1)
            and conv.dilation == (1, 1) and conv.groups == 1)


def _dense_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                starts: Sequence[int] | None = None) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, padding=1)`` of a channels-last map as one matrix product.

    The map's H·W·Cin inputs (channels-last order) times the kernel's matrix
    (:func:`frd.classification.distillation.dense_conv.dense_matrix`); the result is channels last. Gradients reach
    x, weight and bias.
    With ``starts``, ``weight`` and ``bias`` have a leading group axis and images
    ``starts[k]:starts[k + 1]`` take group k's.
    """
    n, c_in, h, w = x.shape
    single = starts is None
    matrix = dense_matrix(weight.unsqueeze(0) if single else weight, h, w)
    rows = channels_last(x).permute(0, 2, 3, 1).reshape(n, h * w * c_in)
    y = _by_group(lambda xs, m, c: torch.addmm(c.repeat(h * w), xs, m), rows, starts, matrix[0] if single else matrix, bias)
    return y.view(n, h, w, -1).permute(0, 3, 1, 2)


_POOL_MATRICES: dict[tuple[int, int], torch.Tensor] = {}
SMALL_MAP = 64
"""Largest H·W pooled by a matrix product (its cost grows with (H·W)²; measured: faster than the
row/column sums up to 8×8, slower from 14×14)."""


def _avg_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """``F.avg_pool2d(x, 2)`` of an NCHW tensor."""
    n, c, h, w = x.shape
    if h % 2 or w % 2:
        return F.avg_pool2d(x, 2)
    if h * w <= SMALL_MAP:
        key = (h, w)
        if key not in _POOL_MATRICES:
            matrix = torch.zeros(h, w, h // 2, w // 2)
            for i in range(h):
                for j in range(w):
                    matrix[i, j, i // 2, j // 2] = 0.25
            _POOL_MATRICES[key] = matrix.view(h * w, (h // 2) * (w // 2))
        matrix = _POOL_MATRICES[key].to(dtype=x.dtype, device=x.device)
        return (x.reshape(n * c, h * w) @ matrix).view(n, c, h // 2, w // 2)
    rows = x.reshape(n, c, h // 2, 2, w)
    rows = rows[:, :, :, 0] + rows[:, :, :, 1]
    cols = rows.view(n, c, h // 2, w // 2, 2)
    return (cols[..., 0] + cols[..., 1]) * 0.25
