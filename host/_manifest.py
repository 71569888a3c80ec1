"""Extension manifests: the pydantic model, loading from YAML/JSON, and the published JSON Schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

HookName = Literal["beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk"]
HOOK_NAMES: tuple[str, ...] = ("beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")

_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def sanitize_name(name: str) -> str:
    """The tool-namespace form of an extension name: `my-cool-ext` -> `my_cool_ext`, `a--b` -> `a_b`.

    Runs of anything but ASCII letters and digits become one `_`; leading and trailing separators are
    trimmed. Raises ValueError when nothing is left.
    """
    cleaned = _SEPARATORS.sub("_", name).strip("_")
    if not cleaned:
        raise ValueError(f"extension name {name!r} has no letters or digits")
    return cleaned


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class ContextPermission(_Model):
    """Which context blocks an extension may read and write: a list of labels, or "all" / "own"."""

    read: list[str] | Literal["all", "own"] = Field(default_factory=list)
    write: list[str] | Literal["all", "own"] = Field(default_factory=list)


class SessionPermission(_Model):
    send_message: bool = False
    metadata: bool = False


class Permissions(_Model):
    workspace: Literal["none", "read", "read-write"] = "none"
    messages: Literal["none", "read"] = "none"
    context: ContextPermission = Field(default_factory=ContextPermission)
    session: SessionPermission = Field(default_factory=SessionPermission)
    network: list[str] = Field(default_factory=list, description="Hosts the extension may reach; empty: none")

    def grants_bridge(self) -> bool:
        """True when the extension may call anything on the HostBridge (its handlers then get a client)."""
        ctx = self.context
        return (
            self.workspace != "none"
            or self.messages != "none"
            or bool(ctx.read)
            or bool(ctx.write)
            or self.session.send_message
            or self.session.metadata
        )


class HookPolicy(_Model):
    """Per-hook policy. `failure: closed` turns a failure into a denial where a denial means something."""

    timeout_ms: int | None = Field(default=None, gt=0, le=600_000)
    failure: Literal["open", "closed"] = "open"
    decisions: bool = Field(
        default=False, description="beforeToolCall only: honour block/substitute/allow-with-input decisions"
    )


class Limits(_Model):
    memory_mb: int = Field(default=512, ge=128, description="Address-space limit; below ~128 MB gRPC crashes")
    cpu_seconds: int = Field(default=300, gt=0)
    open_files: int = Field(default=256, ge=16)
    processes: int = Field(default=64, ge=1)
    tool_output_kb: int = Field(
        default=256, ge=1, le=16_384,
        description="The most of one tool output (and of one preliminary result) the host keeps, in KiB; more is "
        "truncated with a visible marker before it reaches the transcript, the model or the store",
    )
    tool_preliminaries: int = Field(
        default=1_000, ge=0, le=1_000_000,
        description="Preliminary results of one tool call delivered at most (a flood is also thinned to ~20/s "
        "after a burst of 64); the final output is always delivered",
    )


class Timeouts(_Model):
    start_ms: int = Field(default=10_000, gt=0, description="Spawn to handshake")
    hook_ms: int = Field(default=5_000, gt=0, description="Default per-hook deadline")
    tool_ms: int = Field(default=60_000, gt=0, description="Per tool call")
    shutdown_ms: int = Field(default=2_000, ge=0, description="Grace before SIGKILL")
    health_interval_ms: int = Field(
        default=5_000, ge=0, description="How often the host checks the extension still answers; 0: never"
    )
    health_timeout_ms: int = Field(default=2_000, gt=0, description="Deadline of one health check")
    health_failures: int = Field(default=3, ge=1, description="Misses in a row that count as a crash")


class Observations(_Model):
    """How observations (afterToolCall, onStepFinish, onChunk, observe-only beforeToolCall) reach the extension."""

    max_delay_ms: int = Field(
        default=100, ge=0, le=10_000,
        description="How long observations may be held back to share one frame. The turn's last ones are sent "
        "(and waited for) when the turn ends, and an awaited hook or tool call sends what is held first. "
        "Lower it for live per-chunk reactions; 0 sends each at once.",
    )


class Restart(_Model):
    max_crashes: int = Field(default=3, ge=1, description="Quarantine after this many crashes ...")
    window_seconds: float = Field(default=300, gt=0, description="... within this many seconds")
    backoff_ms: int = Field(default=200, ge=0, description="First restart delay; doubles per crash")
    max_backoff_ms: int = Field(default=10_000, ge=0)


class Tls(_Model):
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None


class Manifest(_Model):
    """An extension manifest (YAML or JSON). Exactly one of `command` and `endpoint`."""

    name: str = Field(min_length=1, max_length=128)
    version: str = "0.0.0"
    description: str = ""
    command: list[str] | None = Field(default=None, min_length=1)
    cwd: str | None = Field(default=None, description="Working directory; default: the manifest's directory")
    endpoint: str | None = Field(default=None, description="A remote gRPC target instead of a command")
    tls: Tls | None = None
    token: str | None = Field(default=None, description="endpoint only: the token the remote extension expects")
    permissions: Permissions = Field(default_factory=Permissions)
    hooks: dict[HookName, HookPolicy] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    observations: Observations = Field(default_factory=Observations)
    restart: Restart = Field(default_factory=Restart)
    env: list[str] = Field(default_factory=list, description="Host environment variables passed through by name")
    # Where the manifest was read from (not part of the file).
    source: str | None = Field(default=None, exclude=True)

    @field_validator("name")
    @classmethod
    def _name_has_letters(cls, value: str) -> str:
        sanitize_name(value)
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @model_validator(mode="after")
    def _command_xor_endpoint(self) -> Manifest:
        if (self.command is None) == (self.endpoint is None):
            raise ValueError("give exactly one of `command` (a process to start) and `endpoint` (a gRPC target)")
        policy = self.hooks
        for hook, pol in policy.items():
            if pol.decisions and hook != "beforeToolCall":
                raise ValueError(f"hooks.{hook}.decisions: only beforeToolCall can make decisions")
        return self

    @property
    def tool_prefix(self) -> str:
        return sanitize_name(self.name)

    def hook_policy(self, hook: str) -> HookPolicy:
        return self.hooks.get(hook, HookPolicy())  # type: ignore[call-overload]

    def hook_timeout_s(self, hook: str) -> float:
        ms = self.hook_policy(hook).timeout_ms or self.timeouts.hook_ms
        return ms / 1000.0

    def base_dir(self) -> Path:
        return Path(self.source).resolve().parent if self.source else Path.cwd()

    def working_dir(self) -> Path:
        base = self.base_dir()
        return (base / self.cwd).resolve() if self.cwd else base


class ManifestError(ValueError):
    """A manifest could not be read or is invalid. `file`, `field` and `reason` say where and why."""

    def __init__(self, file: str | None, field: str | None, reason: str) -> None:
        self.file = file
        self.field = field
        self.reason = reason
        where = ": ".join(p for p in (file, field) if p)
        super().__init__(f"{where}: {reason}" if where else reason)


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-"))]
    return ".".join(parts) or "(top level)"


def parse_manifest(data: Any, source: str | None = None) -> Manifest:
    """Validate an already-parsed manifest mapping. Raises ManifestError naming the source and field."""
    if not isinstance(data, dict):
        raise ManifestError(source, None, f"a manifest is a mapping, got {type(data).__name__}")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _field_path(first["loc"])
        reason = first["msg"].removeprefix("Value error, ")
        more = len(exc.errors()) - 1
        if more:
            reason += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ManifestError(source, field, reason) from None
    return manifest.model_copy(update={"source": source})


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest file (.yaml, .yml or .json)."""
    path = Path(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(name, None, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(name, None, f"cannot read: {exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ManifestError(name, None, f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    return parse_manifest(data, source=str(path.resolve()))


def manifest_json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (camelCase field names, as written in manifest files)."""
    schema = Manifest.model_json_schema(by_alias=True, mode="validation")
    schema["properties"].pop("source", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "hookwire extension manifest"
    return schema
