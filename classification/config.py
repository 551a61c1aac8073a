"""The resolved configuration of a classification experiment (saved with every result)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Sequence

from frd.channel import CHANNELS, check_channel
from frd.classification.data import DATASETS
from frd.classification.models import MODELS
from frd.classification.partitions import PARTITIONS, PartitionSpec, default_min_samples
from frd.clock import CLOCK_DEFAULTS, DEVICE_FLOPS, SERVER_FLOPS, ClockSettings
from frd.codecs.link import CodecSettings
from frd.errors import FrdError
from frd.options import NoOptions, options_key
from frd.participation import check_participation, participants
from frd.results import ResumeKey, run_id

PAPER = {"dataset": "mnist", "devices": 10, "samples_per_device": 500, "rounds": 16,
         "iterations_per_round": 400, "lr": 0.01}
"""The Mix2FLD letter's simulation parameters that every method shares [Oh et al. 2020]: K = 6,400
local iterations, split [our choice] into 16 rounds × 400; η = 0.01; 10 devices × 500 MNIST samples.
A method's own paper values (β, K_s, ε) are its options' ``PAPER``."""

NOT_IN_RESUME_KEY = ("method", "seeds", "first_seed", "threads", "data_dir", "download", "options")
"""Fields that do not change a seed's results, or enter the key elsewhere: the method names its
part of the key, which holds its options, so that one folder gathers several methods."""
ADDED_LATER = {"clients_per_round": None, "fraction": None, "min_clients": 1, "shards_per_client": 2,
               "codec_up": "fp32", "codec_down": "fp32", "error_feedback": False, "compress": "update",
               **CLOCK_DEFAULTS}
"""Fields added after results were saved, with their defaults: in the resume key only when set
otherwise, so folders written before them still resume."""
RETIRED = ("method",)
"""Common fields of resume keys written before one folder could gather several methods."""


@dataclass(frozen=True)
class ClsConfig:
    """One experiment; each seed runs with these values.

    The defaults are scaled down for a CPU: 16 rounds × 100 local iterations (K = 1,600; paper
    6,400), so FL and FD on digits take seconds and a seed on MNIST about a minute on one thread.
    ``PAPER`` has the paper's values."""

    method: str = "fl"
    """Method name, a key of ``frd.classification.methods.CLS_METHODS``."""
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
    """How the pool is split over devices: iid, mix2fld, dirichlet or shards (McMahan et al. 2017)."""
    alpha: float = 0.5
    """Dirichlet concentration α (> 0); smaller is more label skew."""
    min_samples: int | None = None
    """Dirichlet: redraw until every device holds at least this many samples; None: 10
    [NIID-Bench], or 1 where ``samples_per_device`` is below 10 (``partitions.default_min_samples``)."""
    minority_labels: int = 2
    """mix2fld: labels of which a device holds only a few samples [Oh et al. 2020: 2]."""
    minority_samples: int = 2
    """mix2fld: samples of each such label [Oh et al. 2020: 2]."""
    shards_per_client: int = 2
    """shards: label-sorted shards each device gets [McMahan et al. 2017: 2]."""
    devices: int = 10
    """Number of devices |D| [Oh et al. 2020: 10]."""
    clients_per_round: int | None = None
    """Devices sampled (without replacement) for each round, m [McMahan et al. 2017]; None: every
    device (full participation, the sources' setting), or ``fraction``'s."""
    fraction: float | None = None
    """Share C of the devices sampled for each round, in (0, 1]: m = max(⌊C·devices⌋, min_clients)
    [McMahan et al. 2017: max(C·K, 1); Flower's fraction_train and min_train_nodes]."""
    min_clients: int = 1
    """With ``fraction``: the fewest devices a round samples [our choice: 1, McMahan et al. 2017's; Flower's is 2]."""
    samples_per_device: int | None = None
    """Local samples per device; None: 500 [Oh et al. 2020] or the most the pool can serve (digits: 130 IID)."""
    model: str = "auto"
    """cnn, mlp, convnet or auto (the method's choice, e.g. convnet for feddm/feddualmatch; else mlp for
    digits, the Mix2FLD letter's cnn otherwise)."""
    width: int | None = None
    """Model width; None: the model's default (cnn 30 channels, mlp 64 units, convnet 128 channels; 32 for
    feddm/feddualmatch under the cpu preset)."""
    rounds: int = 16
    """Exchange rounds [our choice: 16, so that 16 × 400 = the paper's K = 6,400]."""
    iterations_per_round: int = 100
    """Local SGD iterations per device per round [paper scale 400; scaled down 4× for CPU]."""
    batch_size: int = 10
    """Local minibatch size [our choice; the letter gives none. 10 reached the accuracy of 32 on MNIST at half the time]."""
    lr: float = 0.01
    """SGD learning rate η [Oh et al. 2020: 0.01]."""
    reference_device: int = 0
    """The device whose model is evaluated each round [Oh et al. 2020: a randomly selected device]."""
    channel: str = "ideal"
    """Channel model name in frd.channel.CHANNELS."""
    channel_options: dict[str, float | bool | str] = field(default_factory=dict)
    """Options passed to the channel factory by name (wireless: p_up_dbm=15, preset=symmetric, …)."""
    codec_up: str = "fp32"
    """How devices encode their uploads' floats: fp32 (as is), fp16, bf16, q<b>, topk:<f>[+codec] (``frd.codecs``)."""
    codec_down: str = "fp32"
    """How the server encodes each device's download (the same codecs)."""
    error_feedback: bool = False
    """Devices add what their uplink codec dropped from their weights to their next upload (a lossy codec-up)."""
    compress: str = "update"
    """Weights under a codec: the update from what the device last received (update), or the weights themselves."""
    speed_spread: float = 0.0
    """σ of each device's lognormal rate around --device-flops (0: every device alike; ``frd.clock``)."""
    availability: float = 1.0
    """Probability that a device is online for a round, in (0, 1]; the sampled devices offline sit it out."""
    round_policy: str = "sync"
    """How a round closes: sync (the last upload in) or deadline:<s> (later uploads left out, marked late)."""
    device_flops: float = DEVICE_FLOPS
    """A device's median rate in FLOP/s on the virtual clock [our choice, ``frd.clock.DEVICE_FLOPS``]."""
    server_flops: float = SERVER_FLOPS
    """The server's rate in FLOP/s [our choice, ``frd.clock.SERVER_FLOPS``]."""
    seeds: int = 20
    """Runs: seeds first_seed … first_seed+seeds−1 [our choice: 20, ``frd rl``'s default, so that the
    summary's quartiles and intervals mean something; ``--seeds 1`` for a quick look]."""
    first_seed: int = 0
    """Seed of the first run."""
    threads: int = 1
    """torch intra-op threads (the machines are shared; results are reproducible for a fixed count)."""
    options: Any = field(default_factory=NoOptions)
    """The method's resolved options (its ``Options`` dataclass); build configs with
    ``frd.classification.methods.cls_config``, which fills them in."""

    def __post_init__(self) -> None:
        for what, value, known in (("dataset", self.dataset, DATASETS), ("partition", self.partition, PARTITIONS),
                                   ("model", self.model, ["auto", *MODELS]), ("channel", self.channel, CHANNELS)):
            if value not in known:
                raise FrdError(f"unknown {what} {value!r}; choose one of {', '.join(known)}")
        positive = {"devices": self.devices, "rounds": self.rounds, "iterations_per_round": self.iterations_per_round,
                    "batch_size": self.batch_size, "seeds": self.seeds, "threads": self.threads}
        for name, count in positive.items():
            if count < 1:
                raise FrdError(f"--{name.replace('_', '-')} must be at least 1, got {count}")
        if not self.alpha > 0:
            raise FrdError(f"--alpha must be > 0, got {self.alpha}; try 0.5 (mild) or 0.1 (strong label skew)")
        if not self.lr > 0:
            raise FrdError(f"--lr must be > 0, got {self.lr}")
        if not 0 < self.test_fraction < 1:
            raise FrdError(f"--test-fraction must be in (0, 1), got {self.test_fraction}")
        for name in ("first_seed", "split_seed", "minority_labels", "minority_samples", "min_samples"):
            if (getattr(self, name) or 0) < 0:
                raise FrdError(f"--{name.replace('_', '-')} must be at least 0, got {getattr(self, name)}")
        if self.samples_per_device is not None and self.samples_per_device < 1:
            raise FrdError(f"--samples-per-device must be at least 1, got {self.samples_per_device}")
        if self.width is not None and self.width < 1:
            raise FrdError(f"--width must be at least 1, got {self.width}")
        if not 0 <= self.reference_device < self.devices:
            raise FrdError(f"--reference-device must be a device index in 0..{self.devices - 1}, "
                           f"got {self.reference_device}")
        self._check_participation()
        check_channel(self.channel, self.channel_options)
        self.codecs().validate(sends_floats=True)
        self.clock().validate()

    def codecs(self) -> CodecSettings:
        return CodecSettings(self.codec_up, self.codec_down, self.error_feedback, self.compress)

    def clock(self) -> ClockSettings:
        return ClockSettings(self.speed_spread, self.availability, self.round_policy, self.device_flops,
                             self.server_flops)

    def _check_participation(self) -> None:
        check_participation(self.devices, self.clients_per_round, self.fraction, total_flag="--devices",
                            per_round_flag="--clients-per-round")
        if not 1 <= self.min_clients <= self.devices:
            raise FrdError(f"--min-clients must lie in 1..{self.devices} (--devices), got {self.min_clients}")
        if self.min_clients != 1 and self.fraction is None:
            raise FrdError(f"--min-clients {self.min_clients} applies with --fraction only")
        if self.shards_per_client < 1:
            raise FrdError(f"--shards-per-client must be at least 1, got {self.shards_per_client}")

    @property
    def participants_per_round(self) -> int:
        """Devices sampled for each round: ``clients_per_round``, else from ``fraction`` (rounded down,
        at least ``min_clients``), else all of them."""
        return participants(self.devices, self.clients_per_round, self.fraction, self.min_clients)

    @property
    def partial_participation(self) -> bool:
        """Whether a round samples fewer than all devices."""
        return self.participants_per_round < self.devices

    @property
    def run_seeds(self) -> range:
        """The seeds of this experiment's runs."""
        return range(self.first_seed, self.first_seed + self.seeds)

    @property
    def partition_spec(self) -> PartitionSpec:
        return PartitionSpec(self.alpha, self.min_samples, self.minority_labels, self.minority_samples,
                             self.shards_per_client)

    def resume_key(self) -> ResumeKey:
        """Everything that changes a seed's results: the common fields (not the number of seeds,
        threads or where the data files are) and the method's resolved options."""
        common = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NOT_IN_RESUME_KEY
                  and not (f.name in ADDED_LATER and getattr(self, f.name) == ADDED_LATER[f.name])}
        if self.min_samples is None:  # keyed as the minimum it stands for: folders written before None resume
            common["min_samples"] = default_min_samples(self.samples_per_device)
        return ResumeKey(common, {self.method: options_key(self.options)}, RETIRED)


def as_configs(configs: ClsConfig | Sequence[ClsConfig]) -> tuple[ClsConfig, ...]:
    """One config, or several (one per method: ``frd.classification.methods.cls_configs``), as a tuple."""
    return (configs,) if isinstance(configs, ClsConfig) else tuple(configs)


def run_ids(configs: ClsConfig | Sequence[ClsConfig]) -> set[str]:
    """The runs of the configs' seeds, every method's (a folder may hold others)."""
    return {run_id(config.method, s) for config in as_configs(configs) for s in config.run_seeds}


def shared_key(configs: Sequence[ClsConfig]) -> ResumeKey:
    """The resume key of several methods run into one folder: their common fields, which must be
    the same (the same data, partitions and budget, so the seeds compare), and each one's options."""
    methods = [config.method for config in configs]
    if not methods:
        raise FrdError("give at least one classification method")
    twice = sorted({m for m in methods if methods.count(m) > 1})
    if twice:
        raise FrdError(f"{', '.join(twice)} listed twice in {','.join(methods)}: each method runs once per seed")
    keys = [config.resume_key() for config in configs]
    for config, key in zip(configs[1:], keys[1:]):
        changed = [name for name in key.common if key.common[name] != keys[0].common[name]]
        if changed:
            raise FrdError(f"{configs[0].method} and {config.method} differ in {', '.join(changed)}: the methods "
                           "of one experiment share every setting but their own options")
    return ResumeKey(keys[0].common, {m: o for key in keys for m, o in key.methods.items()}, RETIRED)


def experiment_record(configs: Sequence[ClsConfig]) -> ClsConfig | dict[str, Any]:
    """What ``config.json`` holds of the configs (through ``Executor.record``): one config itself;
    several as RL's, the common fields with ``methods`` and each method's ``options``."""
    if len(configs) == 1:
        return configs[0]
    common = {k: v for k, v in asdict(configs[0]).items() if k not in ("method", "options")}
    return {"methods": [c.method for c in configs], **common,
            "options": {c.method: options_key(c.options) for c in configs}}
