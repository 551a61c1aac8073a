"""Where dataset distillation's time goes: the fused ConvNet passes and the clients batched.

    python -m benchmarks.distill_parts [--width 32] [--steps 200] [--calls 3] [--repeats 3]

Two parts of a default digits run (issue 13 §3), each timed in this process with one torch
thread, alternating:

- the server's fine-tuning, ms per SGD step of batch 256 on 2,000 synthetic 8×8 images
  (``distill_server.finetune``, momentum 0.9, weight decay 5e-4), with the ConvNet's first-order
  passes fused (``frd.classification.distillation.first_block`` and ``frd.classification.distillation.norm_block``) and with
  PyTorch's operators (``convnet_layer_outputs(..., fused=False)``, the path gradient matching
  keeps);
- a round of the clients' distribution matching (the cpu preset: 30 image updates, 16 real
  images per class, IPC 10) for 10 clients of 130 images, ms per round: all clients in one
  ``distill_clients`` call and client after client (``distill``), on 10 classes each (IID) and
  on 1–3 classes each (as at Dirichlet α = 0.1).

CPU milliseconds (``time.process_time``), the median of ``--repeats``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch

import frd.classification.distillation.client as client
import frd.classification.distillation.server as server
from frd.classification.models import ConvNet


@contextmanager
def unfused() -> Iterator[None]:
    """The server's ConvNet passes through PyTorch's operators and autograd, as before the fused
    blocks and the hand-walked fine-tuning gradients."""
    original, plan = server.convnet_layer_outputs, server.fused_plan

    def plain(model: ConvNet, x: torch.Tensor, fused: bool = True, weights: Sequence[torch.Tensor] | None = None,
              starts: Sequence[int] | None = None) -> list[torch.Tensor]:
        return original(model, x, False, weights, starts)

    server.convnet_layer_outputs, server.fused_plan = plain, lambda model, shape: None
    try:
        yield
    finally:
        server.convnet_layer_outputs, server.fused_plan = original, plan


def cpu_ms(work: Callable[[], object], per: int) -> float:
    start = time.process_time()
    work()
    return (time.process_time() - start) / per * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=32, help="ConvNet channels (the cpu preset's 32)")
    parser.add_argument("--steps", type=int, default=200, help="fine-tuning steps per timing")
    parser.add_argument("--calls", type=int, default=3, help="clients' rounds per timing")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    model = ConvNet((1, 8, 8), 10, width=args.width)
    images, labels = torch.randn(2000, 1, 8, 8, generator=g), torch.randint(0, 10, (2000,), generator=g)
    preset = client.DistillConfig()
    epochs = -(-args.steps // 8)  # 2,000 images in batches of 256: 8 steps an epoch
    held = {"iid": [10] * 10, "few classes": [1 + k % 3 for k in range(10)]}
    real = {name: [(torch.randn(130, 1, 8, 8, generator=g), torch.arange(130) % n) for n in classes]
            for name, classes in held.items()}

    def finetune() -> None:
        server.finetune(model, images, labels, epochs, 256, 0.01, g)

    def together(name: str) -> Callable[[], object]:
        return lambda: [client.distill_clients([client.ClientData(model, x, y, 5.0, g) for x, y in real[name]], preset)
                        for _ in range(args.calls)]

    def one_by_one(name: str) -> Callable[[], object]:
        return lambda: [client.distill(model, x, y, preset, 5.0, g) for _ in range(args.calls) for x, y in real[name]]

    times: defaultdict[str, list[float]] = defaultdict(list)
    finetune()  # numba's kernels load, oneDNN picks its kernels
    for _ in range(args.repeats):
        times["finetune fused"].append(cpu_ms(finetune, epochs * 8))
        with unfused():
            times["finetune torch"].append(cpu_ms(finetune, epochs * 8))
        for name in held:
            times[f"{name} together"].append(cpu_ms(together(name), args.calls))
            times[f"{name} one by one"].append(cpu_ms(one_by_one(name), args.calls))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"ConvNet width {args.width}, CPU ms, median of {args.repeats}")
    print(f"fine-tuning step (batch 256): fused {median['finetune fused']:.2f}, torch {median['finetune torch']:.2f} "
          f"({median['finetune torch'] / median['finetune fused']:.2f}×)")
    for name in held:
        alone, batched = median[f"{name} one by one"], median[f"{name} together"]
        print(f"clients' round, {name} ({preset.iterations} updates, 10 clients): together {batched:.0f}, "
              f"one by one {alone:.0f} ({alone / batched:.2f}×)")


if __name__ == "__main__":
    main()
