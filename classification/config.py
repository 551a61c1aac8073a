"""The resolved configuration of a classification experiment (saved with every result)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from frd.errors import FrdError
from classification.partitions import PartitionSpec

PAPER = {"dataset": "mnist", "devices": 10, "samples_per_device": 500, "rounds": 16,
         "iterations_per_round": 400, "lr": 0.01, "beta": 0.01, "server_iterations": 3200, "server_lr": 0.05}
"""The Mix2FLD letter's simulation parameters [seed 003]: K = 6,400 local iterations, split
[ours] into 16 rounds × 400; K_s = 3,200 server KD iterations per global update; η = 0.01;
ε = 0.05 (read as the server's KD step size); β = 0.01; 10 devices × 500 MNIST samples."""

SEED_SAMPLE_FIELDS = ("gamma", "n_mix", "n_inv", "n_s", "server_iterations", "server_lr")
"""Options of FLD / MixFLD / Mix2FLD, added after the first results were saved: left out of the
resume key while at their defaults, so folders of earlier FL / FD runs still resume."""


@dataclass(frozen=True)
class ClsConfig:
    """One experiment; each seed runs with these values.

    The defaults are scaled down for a CPU: 16 rounds × 100 local iterations (K = 1,600; paper
    6,400), so FL and FD on digits take seconds and a seed on MNIST about a minute on one thread.
    ``PAPER`` has the paper's values."""

    method: str = "fl"
    """Method name, a key of ``classification.methods.METHODS``."""
    dataset: str = "digits"
    """digits (bundled 8×8, no files), mnist (IDX files) or cifar10 (python batches)."""
    data_dir: str | None = None
    """Folder of the dataset files; None: ../shared/data/<dataset> beside the repo, else ~/.cache/frd/<dataset>."""
    download: bool = False
    """Fetch missing files from the usual mirrors (otherwise a missing file is an error saying where to get it)."""
    test_fraction: float = 0.2
    """Share held out for testing when a dataset has no official training split (digits; MNIST test files only)."""
    split_seed: int = 0
    """Seed of that pool/test split; fixed across run seeds so every seed tests on the same images."""
    partition: str = "iid"
    """How the pool is split over devices: iid, mix2fld or dirichlet."""
    alpha: float = 0.5
    """Dirichlet concentration α (> 0); smaller is more label skew."""
    min_samples: int = 10
    """Dirichlet: redraw until every device holds at least this many samples [NIID-Bench]."""
    minority_labels: int = 2
    """mix2fld: labels of which a device holds only a few samples [seed 003: 2]."""
    minority_samples: int = 2
    """mix2fld: samples of each such label [seed 003: 2]."""
    devices: int = 10
    """Number of devices |D| [seed 003: 10]."""
    samples_per_device: int | None = None
    """Local samples per device; None: 500 [seed 003] or the most the pool can serve (digits: 130 IID)."""
    model: str = "auto"
    """cnn, mlp, convnet or auto (the method's choice, e.g. convnet for feddm/feddualmatch; else mlp for
    digits, the seed's cnn otherwise)."""
    width: int | None = None
    """Model width; None: the model's default (cnn 30 channels, mlp 64 units, convnet 128 channels; 32 for
    feddm/feddualmatch under the cpu preset)."""
    rounds: int = 16
    """Exchange rounds [ours: 16, so that 16 × 400 = the paper's K = 6,400]."""
    iterations_per_round: int = 100
    """Local SGD iterations per device per round [paper scale 400; scaled down 4× for CPU]."""
    batch_size: int = 10
    """Local minibatch size [ours; the seed gives none. 10 reached the accuracy of 32 on MNIST at half the time]."""
    lr: float = 0.01
    """SGD learning rate η [seed 003: 0.01]."""
    beta: float = 0.01
    """Weight β of the distillation term in FD's local loss [seed 003: 0.01]."""
    ipc: int = 10
    """feddm/feddualmatch: synthetic images per class each client uploads [seed 000: 10]."""
    distill_preset: str = "cpu"
    """feddm/feddualmatch budgets: cpu (scaled down) or paper (the published scale, GPU work); see
    ``DistillConfig.preset`` and ``ServerConfig.preset``."""
    distill_iterations: int | None = None
    """feddm/feddualmatch: image updates per client and round; None: the preset's (cpu 30, paper 20,000)."""
    server_epochs: int | None = None
    """feddm/feddualmatch: server training epochs T_g on the synthetic data; None: the preset's (cpu 5, paper 300)."""
    dp_noise: float | None = None
    """feddm/feddualmatch: DP noise factor σ on the synthetic-set gradient; None: no DP."""
    dp_clip: float = 1.0
    """feddm/feddualmatch with DP: clip norm C of that gradient."""
    gamma: float = 0.2
    """MixFLD / Mix2FLD mixing ratio γ in (0, 0.5) [seed: γ ∈ (0, 0.5); the value is ours]."""
    n_mix: int = 10
    """FLD / MixFLD / Mix2FLD: seed samples each device uploads once (raw or mixed) [seed 003: 10 or 50]."""
    n_inv: int | None = None
    """Mix2FLD: inverse-mixed samples the server makes, in all [seed 003: 10, 20, 50 or 100]; None: every
    one it can (at least one). More than the uploads that arrived allow is an error."""
    n_s: int = 2
    """Mix2FLD: mixed samples (of n_s different devices) per inverse-Mixup group [seed: 2]."""
    server_iterations: int = 800
    """FLD family: server KD iterations per global update [paper K_s = 3,200; scaled down 4× like K]."""
    server_lr: float = 0.05
    """FLD family: server KD step size [seed 003 lists ε = 0.05 without defining it; this is our reading]."""
    reference_device: int = 0
    """The device whose model is evaluated each round [seed 003: a randomly selected device]."""
    channel: str = "ideal"
    """Channel model name in frd.channel.CHANNELS."""
    channel_options: dict[str, float | bool | str] = field(default_factory=dict)
    """Options passed to the channel factory by name (wireless: p_up_dbm=15, preset=symmetric, …)."""
    seeds: int = 1
    """Number of seeds; run s uses seed s."""
    threads: int = 1
    """torch intra-op threads (the machines are shared; results are reproducible for a fixed count)."""

    def __post_init__(self) -> None:
        self._check_names()
        positive = {"devices": self.devices, "rounds": self.rounds, "iterations_per_round": self.iterations_per_round,
                    "batch_size": self.batch_size, "seeds": self.seeds, "threads": self.threads}
        for name, value in positive.items():
            if value < 1:
                raise FrdError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.alpha <= 0:
            raise FrdError(f"--alpha must be > 0, got {self.alpha}; try 0.5 (mild) or 0.1 (strong label skew)")
        if self.lr <= 0 or self.beta < 0:
            raise FrdError(f"need --lr > 0 and --beta >= 0, got lr={self.lr}, beta={self.beta}")
        self._check_seed_samples()
        if self.samples_per_device is not None and self.samples_per_device < 1:
            raise FrdError(f"--samples-per-device must be at least 1, got {self.samples_per_device}")
        if self.ipc < 1 or self.distill_preset not in ("cpu", "paper"):
            raise FrdError(f"need --ipc >= 1 and --distill-preset cpu or paper, got {self.ipc}, {self.distill_preset!r}")
        if not 0 <= self.reference_device < self.devices:
            raise FrdError(f"--reference-device must be a device index in 0..{self.devices - 1}, got {self.reference_device}")

    def _check_seed_samples(self) -> None:
        from classification.mixup import check_gamma

        check_gamma(self.gamma)
        for name, low in (("n_mix", 1), ("n_inv", 1), ("n_s", 2), ("server_iterations", 0)):
            if getattr(self, name) is not None and getattr(self, name) < low:
                raise FrdError(f"--{name.replace('_', '-')} must be at least {low}, got {getattr(self, name)}")
        if self.server_lr <= 0:
            raise FrdError(f"--server-lr must be > 0, got {self.server_lr}")

    def _check_names(self) -> None:
        from frd.channel import CHANNELS
        from classification.data import DATASETS
        from classification.methods import METHODS  # imported here: the methods import this module
        from classification.models import MODELS
        from classification.partitions import PARTITIONS

        for what, value, known in (("method", self.method, METHODS), ("dataset", self.dataset, DATASETS),
                                   ("partition", self.partition, PARTITIONS), ("model", self.model, ["auto", *MODELS]),
                                   ("channel", self.channel, CHANNELS)):
            if value not in known:
                raise FrdError(f"unknown {what} {value!r}; choose one of {', '.join(known)}")

    @classmethod
    def paper(cls, **overrides) -> "ClsConfig":
        """The paper-scale configuration, with ``overrides`` on top."""
        return cls(**{**PAPER, **overrides})

    @property
    def partition_spec(self) -> PartitionSpec:
        return PartitionSpec(self.alpha, self.min_samples, self.minority_labels, self.minority_samples)

    def resume_key(self) -> dict:
        """Everything that must match to resume a results folder: all but the number of seeds."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "seeds"
                and not (f.name in SEED_SAMPLE_FIELDS and getattr(self, f.name) == f.default)}
