"""`hookwire doctor`: the protocol and library versions and which sandbox layers this machine can enforce.

`doctor_report()` gathers the facts once (a pydantic model: the `--json` shape); `print_doctor` draws them —
the plain, stable lines when piped, a coloured table on a terminal.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from pydantic import BaseModel, Field

DISTRIBUTIONS = ("hookwire", "grpcio", "protobuf", "pydantic", "litellm", "PyYAML")


class SandboxLayer(BaseModel):
    available: bool
    detail: str = ""


class DoctorReport(BaseModel):
    """`hookwire doctor --json`."""

    protocol_version: int
    python: str
    executable: str
    packages: dict[str, str | None] = Field(description="distribution -> version, None when not installed")
    platform: str
    euid: int
    sandbox_layers: dict[str, SandboxLayer] | None = Field(description="None when the sandbox module is missing")


def doctor_report() -> DoctorReport:
    from importlib import metadata

    from extension_sdk.proto import PROTOCOL_VERSION

    packages: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            packages[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            packages[dist] = None
    try:
        from .sandbox._plan import sandbox_capabilities
    except ImportError:
        layers = None
    else:
        layers = {name: SandboxLayer(available=bool(state.get("available")), detail=str(state.get("detail", "")))
                  for name, state in sandbox_capabilities().get("layers", {}).items()}
    return DoctorReport(
        protocol_version=int(PROTOCOL_VERSION), python=platform.python_version(), executable=sys.executable,
        packages=packages, platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        euid=os.geteuid(), sandbox_layers=layers,
    )


_FOOTER = (
    "(`sandbox: auto` applies every available layer; `sandbox: required` refuses an extension whose",
    " isolation can't be enforced. A `permissions.network` host list needs egress_proxy in both modes:",
    " without it the extension is refused, never given the whole network.)",
)


def _plain(r: DoctorReport) -> None:
    print(f"hookwire protocol   v{r.protocol_version}")
    print(f"python              {r.python} ({r.executable})")
    for dist, version in r.packages.items():
        print(f"{dist:<19} {version or 'not installed'}")
    print(f"platform            {r.platform}, euid {r.euid}")
    if r.sandbox_layers is None:
        print("sandbox             (sandbox module not available)")
        return
    print("sandbox layers this machine can enforce:")
    for layer, state in r.sandbox_layers.items():
        print(f"  {'yes' if state.available else 'NO '}  {layer:<18} {state.detail}")
    for line in _FOOTER:
        print(line)


def _rich(r: DoctorReport) -> None:
    from rich.table import Table

    from ._cli_output import console, safe_text

    out = console()
    facts = Table(show_header=False, show_edge=False, pad_edge=False, box=None)
    facts.add_column(style="cyan")
    facts.add_column()
    facts.add_row("hookwire protocol", f"v{r.protocol_version}")
    facts.add_row("python", f"{r.python} ({r.executable})")
    for dist, version in r.packages.items():
        facts.add_row(dist, version or safe_text("not installed", "bold red"))
    facts.add_row("platform", f"{r.platform}, euid {r.euid}")
    out.print(facts)
    if r.sandbox_layers is None:
        out.print(safe_text("sandbox: (sandbox module not available)", "yellow"))
        return
    layers = Table(title="sandbox layers this machine can enforce", title_justify="left")
    layers.add_column("")
    layers.add_column("layer", style="cyan")
    layers.add_column("detail", overflow="fold")
    for layer, state in r.sandbox_layers.items():
        layers.add_row(safe_text("yes", "green") if state.available else safe_text("NO", "bold red"), layer,
                       safe_text(state.detail))
    out.print(layers)
    out.print(safe_text("\n".join(_FOOTER), "dim"))


def print_doctor(report: DoctorReport, *, rich: bool) -> None:
    (_rich if rich else _plain)(report)


def doctor_json(report: DoctorReport) -> dict[str, Any]:
    return report.model_dump(mode="json")
