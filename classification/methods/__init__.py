"""Classification methods by name. A new method is one module here (its ``Method`` subclass and
its options dataclass) plus one line below, or a package's entry point (``frd.plugins``); its
options become ``frd cls`` flags by themselves."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Sequence

from frd.classification.config import PAPER, ClsConfig
from frd.classification.methods.base import GLOBAL, Method
from frd.classification.methods.fd import FederatedDistillation
from frd.classification.methods.feddualmatch import FedDM, FedDualMatch
from frd.classification.methods.fl import FedAvg
from frd.classification.methods.fld import FederatedLearningAfterDistillation, Mix2FLD, MixFLD
from frd.errors import FrdError
from frd.options import build_options, document_keywords
from frd.plugins import CLS_GROUP, plugged_in

CLS_METHODS: dict[str, type[Method]] = {
    "fl": FedAvg,
    "fd": FederatedDistillation,
    "feddm": FedDM,
    "feddualmatch": FedDualMatch,
    "fld": FederatedLearningAfterDistillation,
    "mixfld": MixFLD,
    "mix2fld": Mix2FLD,
}
"""``CLS_METHODS[name](ctx)`` builds the method for one run."""
CLS_METHODS.update(plugged_in(CLS_GROUP, CLS_METHODS))  # methods installed from outside (``frd.plugins``)

COMMON_FIELDS = frozenset(f.name for f in fields(ClsConfig)) - {"options"}


def get_method(name: str) -> type[Method]:
    if name not in CLS_METHODS:
        raise FrdError(f"unknown classification method {name!r}; choose one of {', '.join(CLS_METHODS)}")
    return CLS_METHODS[name]


def cls_config(method: str = "fl", paper: bool = False, **values: Any) -> ClsConfig:
    """A ``ClsConfig`` from flat values: common fields by name, the rest the method's options (an
    option of another method is an error naming its methods). ``paper`` starts from the Mix2FLD
    letter's values, the method's own included."""
    return cls_configs((method,), paper, **values)[0]


def cls_configs(methods: str | Sequence[str], paper: bool = False, **values: Any) -> tuple[ClsConfig, ...]:
    """One ``ClsConfig`` per method, as ``cls_config`` builds it, to compare them on the same seeds
    and partitions (``frd.classification.run`` takes them together). ``methods``: names, or one
    comma-separated text (``"fl,fd,mix2fld"``, as ``frd cls --method`` takes them); each option goes
    to every listed method that has it (one that none has is an error naming its methods)."""
    names = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods)
    for name in names:
        get_method(name)
    common = {k: v for k, v in values.items() if k in COMMON_FIELDS}
    own = {k: v for k, v in values.items() if k not in COMMON_FIELDS}
    presets = {m: getattr(klass.Options, "PAPER", {}) for m, klass in CLS_METHODS.items()} if paper else None
    options = build_options(CLS_METHODS, names, own, presets)
    configs = tuple(ClsConfig(**{**(PAPER if paper else {}), **common, "method": m, "options": options[m]})
                    for m in names)
    for config in configs:
        check_clock(config)
    return configs


def check_clock(config: ClsConfig) -> None:
    """The clock's settings that ``config``'s method cannot run with, refused in one line."""
    method = get_method(config.method)
    if not method.counts_flops and not config.clock().is_default:
        raise FrdError(f"{config.method}: its device work is not yet counted in FLOPs, so it runs on the "
                       "virtual clock's defaults only (no --speed-spread, --availability, --round-policy, --*-flops)")
    if config.availability < 1 and not method.partial_participation:
        raise FrdError(f"{config.method} needs every device in every round: --availability below 1 is refused")


for _builder in (cls_config, cls_configs):
    document_keywords(_builder, ClsConfig, CLS_METHODS, ("method", "options"))


def study_config(method: str, paper: bool = False, **values: Any) -> ClsConfig:
    """``cls_config`` for a study's grid: options the method does not have are left out, so one
    set of values serves every method of the grid."""
    own = {f.name for f in fields(get_method(method).Options)}
    return cls_config(method, paper, **{k: v for k, v in values.items() if k in COMMON_FIELDS or k in own})


__all__ = ["CLS_METHODS", "GLOBAL", "Method", "cls_config", "cls_configs", "get_method", "study_config"]
