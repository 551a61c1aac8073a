"""Where dataset distillation's time goes per step, with and without the fused norm block.

    python -m benchmarks.distill_parts [--width 32] [--steps 200] [--calls 5] [--repeats 3]

Two parts of a default digits run (issue 13 §3), each timed in this process with one torch
thread, with the ConvNet's first-order passes fused (``classification.norm_block``: instance
norm, ReLU and 2×2 pool in one numba pass on channels-last maps) and with PyTorch's operators
(``convnet_layer_outputs(..., fused=False)``, the path gradient matching keeps), alternating:

- the server's fine-tuning: ms per SGD step of batch 256 on 2,000 synthetic 8×8 images
  (``distill_server.finetune``, momentum 0.9, weight decay 5e-4);
- a client's distribution matching: ms per ``distill_client.distill`` call (the cpu preset: 30
  image updates, 16 real images per class, IPC 10) on 150 images of 10 classes.

CPU milliseconds (``time.process_time``), the median of ``--repeats``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Iterator

import torch

import classification.distill_client as client
import classification.distill_server as server
from classification.models import ConvNet


@contextmanager
def unfused() -> Iterator[None]:
    """Every ConvNet pass through PyTorch's operators, as before the fused block."""
    original = client.convnet_layer_outputs

    def plain(model: ConvNet, x: torch.Tensor, fused: bool = True) -> list[torch.Tensor]:
        return original(model, x, fused=False)

    client.convnet_layer_outputs = server.convnet_layer_outputs = plain
    try:
        yield
    finally:
        client.convnet_layer_outputs = server.convnet_layer_outputs = original


def cpu_ms(work: Callable[[], None], per: int) -> float:
    start = time.process_time()
    work()
    return (time.process_time() - start) / per * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=32, help="ConvNet channels (the cpu preset's 32)")
    parser.add_argument("--steps", type=int, default=200, help="fine-tuning steps per timing")
    parser.add_argument("--calls", type=int, default=5, help="client distill calls per timing")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    model = ConvNet((1, 8, 8), 10, width=args.width)
    images, labels = torch.randn(2000, 1, 8, 8, generator=g), torch.randint(0, 10, (2000,), generator=g)
    real, real_labels = torch.randn(150, 1, 8, 8, generator=g), torch.arange(150) % 10
    preset = client.DistillConfig()
    epochs = -(-args.steps // 8)  # 2,000 images in batches of 256: 8 steps an epoch

    def finetune() -> None:
        server.finetune(model, images, labels, epochs, 256, 0.01, g)

    def distill() -> None:
        for _ in range(args.calls):
            client.distill(model, real, real_labels, preset, 5.0, g)

    times: defaultdict[str, list[float]] = defaultdict(list)
    for work, name, per in ((finetune, "finetune", epochs * 8), (distill, "distill", args.calls)):
        work()  # numba's kernels load, oneDNN picks its kernels
        for _ in range(args.repeats):
            times[f"{name} fused"].append(cpu_ms(work, per))
            with unfused():
                times[f"{name} torch"].append(cpu_ms(work, per))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"ConvNet width {args.width}, CPU ms, median of {args.repeats}")
    print(f"fine-tuning step (batch 256): fused {median['finetune fused']:.2f}, torch {median['finetune torch']:.2f} "
          f"({median['finetune torch'] / median['finetune fused']:.2f}×)")
    print(f"client distill call ({preset.iterations} updates): fused {median['distill fused']:.1f}, "
          f"torch {median['distill torch']:.1f} ({median['distill torch'] / median['distill fused']:.2f}×)")


if __name__ == "__main__":
    main()
