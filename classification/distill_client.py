"""Client side of FedDualMatch and FedDM: local distribution matching [seed 000; SPEC §3].

A client turns its real images into a small synthetic set S_k (``ipc`` images for every class
it holds) whose per-class mean features match those of its real data under models drawn
around the global model. Neither paper has public code; every choice the seed leaves open is
a named field of :class:`DistillConfig` and is marked [ours] in its documentation.

The model is any ``torch.nn.Module`` with ``layer_outputs(x) -> list[Tensor]``: the outputs
of its J - 1 feature blocks in order, then the logits (J layers in all).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from classification.dp import DPConfig, clip_and_noise
from classification.first_block import FEW_CHANNELS, first_block
from classification.models import ConvNet
from classification.norm_block import channels_last, norm_relu_pool
from frd.errors import FrdError
from frd.payload import FLOAT_BITS, Payload, index_bits

Init = Literal["noise", "real"]
Matching = Literal["layerwise", "last"]
PRESETS = ("feddualmatch", "feddm")
SCALES = ("cpu", "paper")


@dataclass(frozen=True)
class DistillConfig:
    """How a client distils its data each round.

    ipc: synthetic images per class [seed: 10].
    iterations: image updates per round [ours, CPU: 30; ``paper``: DM's 20,000 — neither the
        seed nor SPEC states FedDualMatch's or FedDM's count].
    real_batch: real images drawn per class per iteration [ours, CPU: 16; ``paper``: DM's 256].
    image_lr, image_momentum: SGD on the images [DM (Zhao & Bilen 2023): 1.0 and 0.5].
    init: ``noise`` = N(0, 1) in the model's input space (normalised pixels), FedDualMatch
        [seed]; ``real`` = random real images of the class, FedDM [seed: "FedDM uses real data
        to generate synthetic images"].
    matching: ``layerwise`` = FedDualMatch's backward stages over all J layers [seed];
        ``last`` = last feature layer + logits, FedDM [SPEC §3].
    dp: the Gaussian mechanism on the image gradient (:mod:`classification.dp`), or None.
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

        ``paper``: IPC 10 is the seed's; the iteration count and real batch are DM's, since the
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
    normalisation parameters; buffers are left alone), scaled so that the parameter vector
    lies at L2 distance ``radius`` from the global one — a point on the sphere of the error
    ball [seed: "random Gaussian direction scaled to radius R_t"].
    """
    if not radius >= 0:
        raise ValueError(f"error-ball radius must be >= 0, got {radius}: use a non-negative radius")
    model = copy.deepcopy(global_model)
    params = list(model.parameters())
    direction = [torch.randn(p.shape, generator=generator, dtype=p.dtype, device=generator.device)
                 for p in params]
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
    each later stage adds the next earlier layer (the seed's p = J, J-1, …, 1, loss
    Σ_{q=p..J} MMD_q), until the last stage matches every layer.
    """
    if num_layers < 1:
        raise ValueError(f"a model needs at least one layer to match, got num_layers={num_layers}")
    if not 0 <= stage < num_layers:
        raise ValueError(f"stage must lie in [0, {num_layers}) for {num_layers} layers, got {stage}")
    return list(range(num_layers - 1 - stage, num_layers))


def stage_of_iteration(iteration: int, iterations: int, num_layers: int) -> int:
    """Which stage iteration ``iteration`` of ``iterations`` belongs to [ours].

    The seed does not say how iterations are shared: we give every stage an equal, contiguous
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
    replacement) [ours].
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


def distill(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, config: DistillConfig,
            radius: float, generator: torch.Generator) -> SyntheticSet:
    """One round of a client's distillation on its real ``images`` and ``labels``.

    Each iteration draws a fresh model on the error ball of ``radius`` around ``model`` [ours:
    once per iteration, as FedDM and DM redraw their network every iteration] and a fresh batch
    of ``config.real_batch`` real images per class (fewer when a class holds fewer), takes the
    matching loss of the current stage, optionally privatises its gradient, and steps the
    images. ``model`` itself is never changed.

    Same draws and math as sampling with :func:`sample_model_on_error_ball` and taking
    :func:`distribution_matching_loss` (tested), but faster: the sampled weights are written
    into one working copy instead of deep-copying the model every iteration, the real and
    synthetic class means of all classes come from one reduction per layer instead of one
    per class, and only the matched layers' real means are formed.
    """
    if images.shape[0] != labels.shape[0] or images.shape[0] == 0:
        raise ValueError(f"need as many labels as images and at least one of each, got "
                       f"{images.shape[0]} images and {labels.shape[0]} labels")
    images = _row_major(images)
    classes = tuple(int(c) for c in torch.unique(labels))
    class_index = [torch.nonzero(labels == c).flatten() for c in classes]
    real_by_class = [images[i] for i in class_index]
    syn = init_synthetic(real_by_class, config.ipc, config.init, generator).requires_grad_(True)
    optimizer = torch.optim.SGD([syn], lr=config.image_lr, momentum=config.image_momentum)
    ball = _ErrorBall(model, radius, generator)
    num_layers = len(_layer_outputs_no_grad(ball.model, images[:1]))
    sizes = [min(config.real_batch, i.numel()) for i in class_index]
    segments = torch.repeat_interleave(torch.arange(len(classes)), torch.tensor(sizes))
    for it in range(config.iterations):
        sampled = ball.draw()
        real = images[torch.cat([i[torch.randperm(i.numel(), generator=generator)[:config.real_batch]]
                                 for i in class_index])]
        layers = matched_layers(config.matching, num_layers, it, config.iterations)
        with torch.no_grad():
            real_out = _layer_outputs(sampled, real)
            real_means = {q: _segment_means(real_out[q], segments, sizes) for q in layers}
        syn_out = _layer_outputs(sampled, syn)
        loss = sum(((syn_out[q].flatten(1).unflatten(0, (len(classes), config.ipc)).mean(1) - real_means[q]) ** 2)
                   .sum() for q in layers)
        (grad,) = torch.autograd.grad(loss, syn)
        if config.dp is not None:
            grad = clip_and_noise(grad, config.dp.clip_norm, config.dp.noise, syn.shape[0], generator)
        syn.grad = grad
        optimizer.step()
    return SyntheticSet(syn.detach(), classes)


class _ErrorBall:
    """Draws models on the error ball around ``model`` into one reusable working copy.

    ``draw`` consumes ``generator`` exactly as :func:`sample_model_on_error_ball` does and
    writes the same weights (``centre + direction · radius / ‖direction‖``, the norm summed in
    one float64 reduction over all parameters rather than tensor by tensor), so a run is the
    same as deep-copying the model per iteration, without the copy. The working copy's
    parameters are views of one flat buffer, so a draw is a few operations over all weights at
    once rather than a few per tensor (~0.5 → ~0.15 ms per draw for the digits ConvNet).
    """

    def __init__(self, model: nn.Module, radius: float, generator: torch.Generator) -> None:
        if not radius >= 0:
            raise ValueError(f"error-ball radius must be >= 0, got {radius}: use a non-negative radius")
        self.model = copy.deepcopy(model).eval()
        params = list(self.model.parameters())
        if len({p.dtype for p in params}) != 1:
            raise ValueError("error-ball sampling needs all parameters in one dtype, got "
                             f"{sorted({str(p.dtype) for p in params})}")
        sizes = [p.numel() for p in params]
        self.weights = torch.cat([p.detach().reshape(-1) for p in params])
        for p, flat in zip(params, self.weights.split(sizes)):
            p.data = flat.view_as(p)
            p.requires_grad_(False)
        self.centre = self.weights.clone()
        self.direction = torch.empty(self.weights.shape, dtype=self.weights.dtype, device=generator.device)
        self.directions = [d.view_as(p) for p, d in zip(params, self.direction.split(sizes))]
        self.radius, self.generator = radius, generator

    @torch.no_grad()
    def draw(self) -> nn.Module:
        for d in self.directions:
            torch.randn(d.shape, generator=self.generator, out=d)
        norm = torch.sqrt(self.direction.double().square().sum())
        torch.add(self.centre, (self.direction * (self.radius / norm)).to(self.weights.device), out=self.weights)
        return self.model


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


def _segment_means(x: torch.Tensor, segments: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Per-class mean of the flattened rows of ``x``, rows grouped by class in order (``sizes``)."""
    flat = x.flatten(1)
    if len(set(sizes)) == 1:
        return flat.unflatten(0, (len(sizes), sizes[0])).mean(1)
    sums = torch.zeros(len(sizes), flat.shape[1], dtype=flat.dtype, device=flat.device).index_add_(0, segments, flat)
    return sums / torch.tensor(sizes, dtype=flat.dtype, device=flat.device).unsqueeze(1)


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


def convnet_layer_outputs(model: ConvNet, x: torch.Tensor, fused: bool = True) -> list[torch.Tensor]:
    """``model.layer_outputs(x)`` with the same weights and math, in CPU-friendlier kernels.

    ``fused`` (first derivatives only; not under ``vmap``): channels-last maps; a first block
    reading few channels whole, image by image (:mod:`classification.first_block`); each later
    block's instance norm, ReLU and 2×2 pool in one pass on even sides
    (:mod:`classification.norm_block`); 3×3 convolutions of maps of at most ``DENSE_MAP`` pixels as
    one matrix product (:func:`_dense_conv`); a fine-tuning step of the digits ConvNet ~2.3× faster
    than with PyTorch's operators. Otherwise PyTorch's operators, with
    the 2×2 average pool, PyTorch's slowest step on these small NCHW maps (measured 4× slower
    forward and backward than the alternatives below), as one matrix product with a fixed
    pooling matrix on maps of at most 8×8, a sum of adjacent rows then columns on larger even
    maps, and ``avg_pool2d`` on odd sides; inputs get row-major strides (see :func:`_row_major`).
    Gradients flow to the input and to the model's parameters.
    """
    fused = fused and x.dtype == torch.float32 and x.device.type == "cpu"
    x = channels_last(x) if fused else _row_major(x)
    outputs = []
    for block in cast(nn.ModuleList, model.blocks):
        conv, norm, _, pool = cast(Any, block)  # an nn.Sequential: conv, group norm, ReLU, pool
        plain_pool = pool.kernel_size == 2 and pool.stride == 2 and pool.padding == 0
        fused_norm = fused and plain_pool and norm.num_groups == conv.out_channels  # instance norm
        if fused_norm and _same_3x3(conv) and _even(x) and x.shape[1] <= FEW_CHANNELS:
            x = first_block(x, conv.weight, _bias(conv), norm.weight, norm.bias, norm.eps)
        else:
            x = _conv(x, conv, fused)
            if fused_norm and _even(x):
                x = norm_relu_pool(x, norm.weight, norm.bias, norm.eps)
            else:  # PyTorch's group norm and pooling run ~1.6× slower on channels-last maps
                x = F.group_norm(_row_major(x), norm.num_groups, norm.weight, norm.bias, norm.eps)
                x = _avg_pool_2x2(F.relu(x)) if plain_pool else pool(F.relu(x))
        outputs.append(x)
    outputs.append(model.classifier(x.flatten(1)))
    return outputs


def _even(x: torch.Tensor) -> bool:
    return x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0


def _conv(x: torch.Tensor, conv: nn.Conv2d, fused: bool) -> torch.Tensor:
    """``conv(x)``; on the fused path small maps as one matrix product (:func:`_dense_conv`)."""
    if fused and _same_3x3(conv) and x.shape[2] * x.shape[3] <= DENSE_MAP:
        return _dense_conv(x, conv.weight, _bias(conv))
    return F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding)


def _bias(conv: nn.Conv2d) -> torch.Tensor:
    return conv.bias if conv.bias is not None else conv.weight.new_zeros(conv.out_channels)


DENSE_MAP = 4
"""Largest H·W whose 3×3 convolution runs as one matrix product (:func:`_dense_conv`): on a 2×2
map every tap of every output lands inside the map, so the product wastes nothing, while
oneDNN's convolution computes the padding's zeros too (measured, batch 256, width 32: forward +
backward 680 → 380 µs)."""


def _same_3x3(conv: nn.Conv2d) -> bool:
    """A 3×3 convolution with padding 1, stride 1, no dilation or groups: the output keeps the map's size."""
    return (conv.kernel_size == (3, 3) and conv.padding == (1, 1) and conv.stride == (1, 1)
            and conv.dilation == (1, 1) and conv.groups == 1)


_TAPS: dict[tuple[int, int], torch.Tensor] = {}


def _dense_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, padding=1)`` of a channels-last map as one matrix product.

    The map's H·W·Cin inputs (channels-last order) times a [H·W·Cin, H·W·Cout] matrix whose
    block (input pixel, output pixel) is the kernel's tap joining them, or zeros where no tap
    does; the result is channels last. Gradients reach x, weight and bias through the gather.
    """
    n, c_in, h, w = x.shape
    c_out = weight.shape[0]
    key = (h, w)
    if key not in _TAPS:
        rows, cols = torch.arange(h), torch.arange(w)
        dh = rows[:, None] - rows[None, :] + 1  # [input row, output row] → kernel row, valid in 0..2
        dw = cols[:, None] - cols[None, :] + 1
        tap = dh[:, None, :, None] * 3 + dw[None, :, None, :]  # [hi, wi, ho, wo]
        inside = ((dh >= 0) & (dh < 3))[:, None, :, None] & ((dw >= 0) & (dw < 3))[None, :, None, :]
        _TAPS[key] = torch.where(inside, tap, 9)  # 9: the zero block
    taps = torch.cat([weight.permute(2, 3, 1, 0).reshape(9, c_in, c_out), weight.new_zeros(1, c_in, c_out)])
    matrix = taps[_TAPS[key]].permute(0, 1, 4, 2, 3, 5).reshape(h * w * c_in, h * w * c_out)
    y = torch.addmm(bias.repeat(h * w), channels_last(x).permute(0, 2, 3, 1).reshape(n, h * w * c_in), matrix)
    return y.view(n, h, w, c_out).permute(0, 3, 1, 2)


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
