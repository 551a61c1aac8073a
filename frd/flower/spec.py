"""What a Flower run carries in its run config: the domain, the resolved config and the results
folder, as one JSON string (so the SuperLink and every node rebuild the same experiment)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from frd.domains import Domain, get_domain

RUN_CONFIG_KEY = "frd"


def spec(domain: Domain, config: Any, out: str) -> str:
    return json.dumps({"domain": domain.name, "out": out, "config": asdict(config)})


def read_spec(text: str) -> tuple[Domain, Any, Path]:
    """The domain, config and results folder of a spec written by ``spec``."""
    written: dict[str, Any] = json.loads(text)
    domain = get_domain(written["domain"])
    return domain, domain.config_from_dict(written["config"]), Path(written["out"])
