"""How close a round's local training comes to what this core can do: the floating-point work of
frd's batched local SGD (counted by torch's own FLOP counter, forward and backward), per second,
against a large matrix product on the same threads (what the core attains), and against the same
work done device after device, each with its own model and optimizer, as per-client loops do.

    python -m benchmarks.cls_flops [--model cnn] [--devices 20] [--iterations 50] [--batch 10]
                                   [--threads 1] [--repeats 3] [--csv FILE --variant NAME]

The images are random 28×28 uint8 (speed does not depend on their content); the model, its
stacked devices and the SGD step are frd's (``RunContext.train_devices``). Medians of repeats, the
three timings taking turns within a repeat.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.tidy import record
from frd.classification.context import RunContext
from frd.classification.data import Dataset
from frd.classification.methods import cls_config
from frd.classification.training import per_device_cross_entropy

SAMPLES_PER_DEVICE = 60


def workload(model: str, devices: int, batch: int) -> RunContext:
    rng = np.random.default_rng(0)
    n = 2 * devices * SAMPLES_PER_DEVICE  # room for the partition to take its samples per label
    images = torch.from_numpy(rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8))
    labels = torch.from_numpy(rng.integers(0, 10, n))
    data = Dataset("mnist", images, labels, images[:100], labels[:100], 10)
    config = cls_config("fl", dataset="mnist", model=model, devices=devices, batch_size=batch,
                        samples_per_device=SAMPLES_PER_DEVICE)
    ctx = RunContext.build(config, 0, data)
    ctx.training = list(range(devices))
    return ctx


def step_flops(ctx: RunContext) -> int:
    """The useful FLOPs of one local SGD step of every device: one model's forward and backward on
    a batch (torch's FLOP counter), times the devices. (Counted on the batched step itself, torch's
    counter charges its grouped ``convolution_backward`` as if ungrouped: 10× the forward's count for
    about the forward's time.)"""
    model = ctx.devices.module(0)
    batch = ctx.data.x_pool[:ctx.config.batch_size]
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(Dataset.inputs(batch)), ctx.data.y_pool[:ctx.config.batch_size]).backward()
    return int(counter.get_total_flops()) * ctx.config.devices


def forward_backward_ms(ctx: RunContext, steps: int = 5) -> tuple[float, float]:
    """Milliseconds of the batched step's forward and of its backward (medians of ``steps``)."""
    stack, b = ctx.devices.stack(list(range(ctx.config.devices))), ctx.config.batch_size
    x = Dataset.inputs(ctx.data.x_pool[:ctx.config.devices * b]).view(ctx.config.devices, b, *ctx.data.image_shape)
    y = ctx.data.y_pool[:ctx.config.devices * b].view(ctx.config.devices, b)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logits = stack(x)
        middle = time.perf_counter()
        torch.autograd.grad(per_device_cross_entropy(logits, y).sum(), stack.params)
        times.append((middle - start, time.perf_counter() - middle))
    forward, backward = np.median(np.array(times), axis=0)
    return 1e3 * forward, 1e3 * backward


def batched_seconds(ctx: RunContext, iterations: int) -> float:
    start = time.perf_counter()
    ctx.train_devices(iterations, per_device_cross_entropy)
    return time.perf_counter() - start


def per_device_seconds(ctx: RunContext, iterations: int) -> float:
    """The same steps device after device, each its own module and optimizer (a per-client loop)."""
    batches = ctx.stream.take(iterations, ctx.config.batch_size)
    models = [ctx.devices.module(d) for d in range(ctx.config.devices)]
    start = time.perf_counter()
    for d, model in enumerate(models):
        optimizer = torch.optim.SGD(model.parameters(), lr=ctx.config.lr)
        for step in torch.from_numpy(batches[:, d]):
            optimizer.zero_grad()
            F.cross_entropy(model(Dataset.inputs(ctx.data.x_pool[step])), ctx.data.y_pool[step]).backward()
            optimizer.step()
    return time.perf_counter() - start


def matmul_flops_per_s(size: int = 1024, repeats: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size ** 3 * repeats / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    parser.add_argument("--devices", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", help="also append the rows to this tidy CSV, e.g. benchmarks/results/cls_flops.csv")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ctx = workload(args.model, args.devices, args.batch)
    flops = step_flops(ctx) * args.iterations
    batched_seconds(ctx, 2)  # every kernel loaded before a clock starts
    rows: list[dict] = []
    for repeat in range(args.repeats):
        batched, looped = batched_seconds(ctx, args.iterations), per_device_seconds(ctx, args.iterations)
        peak = matmul_flops_per_s()
        forward_ms, backward_ms = forward_backward_ms(ctx)
        rows.append(dict(model=args.model, devices=args.devices, iterations=args.iterations, batch=args.batch,
                         threads=args.threads, repeat=repeat, gflop=flops / 1e9, batched_s=batched, per_device_s=looped,
                         batched_gflops=flops / batched / 1e9, per_device_gflops=flops / looped / 1e9,
                         matmul_gflops=peak / 1e9, forward_ms=forward_ms, backward_ms=backward_ms))
        print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    median = frame.median(numeric_only=True)
    print(f"{args.model}, {args.devices} devices × {args.iterations} steps of {args.batch}: {median['gflop']:.3f} GFLOP; "
          f"a batched step: forward {median['forward_ms']:.1f} ms, backward {median['backward_ms']:.1f} ms; "
          f"batched {median['batched_gflops']:.2f} GFLOP/s, per device {median['per_device_gflops']:.2f} GFLOP/s, "
          f"a 1024² matmul {median['matmul_gflops']:.1f} GFLOP/s: batched at "
          f"{median['batched_gflops'] / median['matmul_gflops']:.1%} of it, {median['per_device_s'] / median['batched_s']:.2f}× "
          "the per-device loop")
    if args.csv:
        record(frame, Path(args.csv), args.variant)


if __name__ == "__main__":
    main()
