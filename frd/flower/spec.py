"""What a Flower run carries in its run config: the domain, the resolved config and the results
folder, as one JSON string (so the SuperLink and every node rebuild the same experiment)."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from frd.agents.spec import AgentSpec
from frd.classification.config import ClsConfig
from frd.classification.methods import COMMON_FIELDS as CLS_FIELDS
from frd.classification.methods import cls_config
from frd.rl.config import COMMON_FIELDS as RL_FIELDS
from frd.rl.config import RLConfig
from frd.rl.methods import get_method

RUN_CONFIG_KEY = "frd"

Config = ClsConfig | RLConfig


def participants(config: Config) -> int:
    """How many nodes the experiment needs: one per agent or device."""
    return config.agents if isinstance(config, RLConfig) else config.devices


def spec(config: Config, out: str) -> str:
    domain = "rl" if isinstance(config, RLConfig) else "cls"
    return json.dumps({"domain": domain, "out": out, "config": asdict(config)})


def _tuples(value: Any) -> Any:
    """JSON's lists back to the tuples the frozen configs hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _rl_config(values: dict[str, Any]) -> RLConfig:
    common = {k: _tuples(v) for k, v in values.items() if k in RL_FIELDS}
    common["agent_spec"] = tuple(AgentSpec(**entry) for entry in values["agent_spec"])
    options = {m: get_method(m).Options(**{k: _tuples(v) for k, v in o.items()}) for m, o in values["options"].items()}
    return RLConfig(**common, options=options)


def read_spec(text: str) -> tuple[Config, str]:
    """The config and results folder of a spec written by ``spec``."""
    written: dict[str, Any] = json.loads(text)
    values = written["config"]
    if written["domain"] == "rl":
        return _rl_config(values), written["out"]
    common = {k: v for k, v in values.items() if k in CLS_FIELDS and k != "method"}
    return cls_config(values["method"], **common, **values["options"]), written["out"]
