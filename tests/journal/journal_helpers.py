"""Helpers for the decision-journal tests: the guard fixture's manifest, an agent with it, the journal rows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from host import Agent

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

GUARD = Path(__file__).parent / "fixtures" / "guard_ext.py"


def guard_manifest(tmp_path: Path, *args: str, version: str = "1.0.0", name: str = "guard", **fields: Any) -> Path:
    data: dict[str, Any] = {
        "name": name,
        "version": version,
        "command": ["python", str(GUARD), "--version", version, *args],
        "timeouts": {"startMs": 15000, "shutdownMs": 1000},
        "hooks": {"beforeToolCall": {"decisions": True}},
        **fields,
    }
    path = tmp_path / f"{name}-{version}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Scripted(Agent):
    model = "hookwire/scripted"


def asked(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []
