"""What a Flower run carries in its run config: the domain, the resolved config and the results
folder, as one JSON string (so the SuperLink and every node rebuild the same experiment)."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from classification.config import ClsConfig
from classification.methods import COMMON_FIELDS, cls_config

RUN_CONFIG_KEY = "frd"


def cls_spec(config: ClsConfig, out: str) -> str:
    return json.dumps({"domain": "cls", "out": out, "config": asdict(config)})


def read_spec(text: str) -> tuple[ClsConfig, str]:
    """The config and results folder of a spec written by ``cls_spec``."""
    spec: dict[str, Any] = json.loads(text)
    values = spec["config"]
    common = {k: v for k, v in values.items() if k in COMMON_FIELDS and k != "method"}
    return cls_config(values["method"], **common, **values["options"]), spec["out"]
