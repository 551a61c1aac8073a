"""``frd cls``: FL and FD (and the methods added later) on digits, MNIST or CIFAR-10; several
methods (``--method fl,fd,mix2fld``) run on the same seeds and partitions into one folder and table."""
from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Sequence

from frd.backends import add_backend_arguments, backend_from_args
from frd.channel import CHANNELS, parse_channel_option
from frd.classification.config import ClsConfig
from frd.classification.data import DATASETS
from frd.classification.experiment import run_experiment
from frd.classification.methods import CLS_METHODS, cls_configs
from frd.classification.models import MODELS
from frd.classification.partitions import PARTITIONS
from frd.classification.report import cls_table, summarize
from frd.codecs.link import COMPRESS
from frd.domains import add_baseline_flag, check_baseline
from frd.errors import FrdError
from frd.options import add_option_flags, add_out_flag, field_docs, given_options, parse_bool
from frd.results import ResultStore
from frd.tensorboard import add_tensorboard_flag

DEFAULTS = ClsConfig()


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cls", help="classification: FL, FD, FLD/MixFLD/Mix2FLD, FedDM/FedDualMatch",
                              description=__doc__ + " Defaults are scaled down for a CPU; --paper uses the "
                              "Mix2FLD letter's values (MNIST, 10 × 500 samples, 16 rounds × 400 iterations).")
    add_experiment_arguments(p)
    add_backend_arguments(p)
    add_tensorboard_flag(p)
    add_baseline_flag(p)
    p.set_defaults(run=run)


def add_experiment_arguments(p: argparse.ArgumentParser, where: str = "") -> None:
    """The flags of one classification experiment (``frd cls`` and ``frd flower sim/run``); ``where``
    the results folder is, when not here."""
    d, docs = DEFAULTS, field_docs(ClsConfig)
    p.add_argument("--method", metavar="M[,M...]", help=f"exchange method, or several (frd cls) to compare on the "
                   f"same seeds and partitions: {', '.join(CLS_METHODS)} (default {d.method})")
    p.add_argument("--dataset", choices=list(DATASETS), help=f"dataset (default {d.dataset}, needs no files)")
    p.add_argument("--data-dir", metavar="DIR", help="dataset files (default ../shared/data/<dataset> beside the repo "
                   "when it exists, else ~/.cache/frd/<dataset>)")
    p.add_argument("--download", action="store_true", default=None, help="fetch missing dataset files from the usual mirrors")
    p.add_argument("--partition", choices=list(PARTITIONS), help=f"split over devices (default {d.partition})")
    p.add_argument("--alpha", type=float, metavar="A", help=f"Dirichlet concentration, > 0 (default {d.alpha})")
    p.add_argument("--min-samples", type=int,
                   help="Dirichlet minimum per device (default 10, or 1 where --samples-per-device is below 10)")
    p.add_argument("--minority-labels", type=int, help=f"mix2fld: labels a device barely holds (default {d.minority_labels})")
    p.add_argument("--minority-samples", type=int, help=f"mix2fld: samples of each (default {d.minority_samples})")
    p.add_argument("--shards-per-client", type=int, metavar="S",
                   help=f"shards: label-sorted shards per device (default {d.shards_per_client}, McMahan et al. 2017)")
    p.add_argument("--devices", type=int, metavar="N", help=f"number of devices (default {d.devices})")
    p.add_argument("--clients-per-round", type=int, metavar="K",
                   help="devices sampled for each round (default all: full participation)")
    p.add_argument("--fraction", type=float, metavar="C", help="share of devices sampled for each round, in (0, 1]: "
                   "max(floor(C·devices), --min-clients) (default all)")
    p.add_argument("--min-clients", type=int, metavar="M", help=f"with --fraction: fewest per round (default {d.min_clients})")
    p.add_argument("--samples-per-device", type=int, metavar="N",
                   help="local samples (default 500, or the most the pool can serve)")
    p.add_argument("--model", choices=["auto", *MODELS],
                   help="architecture (default auto: convnet for feddm/feddualmatch, else mlp on digits, else cnn)")
    p.add_argument("--width", type=int, help="model width (default cnn 30, mlp 64, convnet 128; "
                   "feddm/feddualmatch with the cpu preset 32)")
    p.add_argument("--rounds", type=int, help=f"exchange rounds (default {d.rounds})")
    p.add_argument("--iterations", dest="iterations_per_round", type=int, metavar="N",
                   help=f"local iterations per round (default {d.iterations_per_round}; paper 400)")
    p.add_argument("--batch-size", type=int, help=f"local minibatch (default {d.batch_size})")
    p.add_argument("--lr", type=float, help=f"SGD learning rate (default {d.lr})")
    p.add_argument("--reference-device", type=int, help=f"device evaluated each round (default {d.reference_device})")
    p.add_argument("--channel", choices=list(CHANNELS), help=f"channel model (default {d.channel})")
    p.add_argument("--channel-opt", dest="channel_options", type=parse_channel_option, action="append", metavar="NAME=VALUE",
                   help="channel model option, e.g. p_up_dbm=15 or preset=symmetric (repeatable)")
    p.add_argument("--codec-up", metavar="CODEC", help=f"{docs['codec_up']} (default {d.codec_up})")
    p.add_argument("--codec-down", metavar="CODEC", help=f"{docs['codec_down']} (default {d.codec_down})")
    p.add_argument("--error-feedback", type=parse_bool, nargs="?", const=True, metavar="yes|no", help=docs["error_feedback"])
    p.add_argument("--compress", choices=list(COMPRESS), help=f"{docs['compress']} (default {d.compress})")
    p.add_argument("--speed-spread", type=float, metavar="SIGMA", help=f"{docs['speed_spread']}")
    p.add_argument("--availability", type=float, metavar="P", help=f"{docs['availability']} (default 1)")
    p.add_argument("--round-policy", metavar="POLICY", help=f"{docs['round_policy']} (default {d.round_policy})")
    p.add_argument("--device-flops", type=float, metavar="FLOPS", help=f"{docs['device_flops']} (default {d.device_flops:g})")
    p.add_argument("--server-flops", type=float, metavar="FLOPS", help=f"{docs['server_flops']} (default {d.server_flops:g})")
    p.add_argument("--seeds", type=int, help=f"{docs['seeds']} (default {d.seeds})")
    p.add_argument("--first-seed", type=int, help=f"{docs['first_seed']} (default {d.first_seed})")
    p.add_argument("--threads", type=int, help=f"torch threads (default {d.threads})")
    p.add_argument("--test-fraction", type=float, help=f"held-out share without an official split (default {d.test_fraction})")
    p.add_argument("--split-seed", type=int, help=f"seed of that split (default {d.split_seed})")
    p.add_argument("--paper", action="store_true", help="start from the paper's parameters instead of the CPU defaults")
    add_out_flag(p, where)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_option_flags(p, CLS_METHODS)


def configs_from_args(args: argparse.Namespace) -> tuple[ClsConfig, ...]:
    """One config per method of ``--method``: the CPU defaults (or, with --paper, the paper's
    values) overridden by every flag given (common flags default to None and method flags are
    absent, meaning "not given")."""
    given = {f.name: getattr(args, f.name) for f in fields(ClsConfig)
             if f.name not in ("method", "options") and getattr(args, f.name, None) is not None}
    if "channel_options" in given:
        given["channel_options"] = dict(given["channel_options"])
    return cls_configs(args.method or ClsConfig.method, paper=args.paper, **given, **given_options(args))


def config_from_args(args: argparse.Namespace) -> ClsConfig:
    """``configs_from_args`` of one method (``frd flower`` runs one at a time)."""
    configs = configs_from_args(args)
    if len(configs) > 1:
        raise FrdError("frd flower runs one classification method at a time; compare several with frd cls")
    return configs[0]


def run(args: argparse.Namespace) -> int:
    configs = configs_from_args(args)
    if args.baseline is not None:  # before anything runs
        check_baseline(args.baseline, [config.method for config in configs])
    report(configs, run_experiment(configs, args.out, progress=not args.no_progress, backend=backend_from_args(args),
                                   tensorboard=args.tensorboard), args.baseline)
    return 0


def report(configs: ClsConfig | Sequence[ClsConfig], store: ResultStore, baseline: str | None = None) -> None:
    """Print the summary of the configs' seeds in ``store``, one column per method
    (``frd.classification.report.summarize``, which also writes the CSVs and figures), with
    P(improvement) against ``baseline`` if given."""
    print(cls_table(summarize(configs, store, baseline)).T.to_string(header=False))
    print(f"tables, summary.csv, accuracy_bits.csv, config and figures (accuracy_bits and accuracy, .png and .pdf) "
          f"in {store.out}")
