"""Extension manifests: the pydantic model, loading from YAML/JSON, and the published JSON Schema.

Manifests are untrusted input. Invariants: a manifest file larger than MAX_MANIFEST_BYTES is refused before it
is parsed; YAML aliases are refused (an alias bomb — "billion laughs" — expands exponentially in
`yaml.safe_load`); every number, list and string has an upper bound, so no field can pin the host (a restart
window of years, a start timeout of days, a million env names). Errors name the file and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from .._errors import ManifestError
from ._turn_config_policy import GRANTABLE_FIELDS, SCALAR_FIELDS, check_grant_names

HookName = Literal["beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk"]

_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")

MAX_MANIFEST_BYTES = 1024 * 1024  # a manifest is a few hundred bytes; 1 MiB is generous and parses in milliseconds
MAX_YAML_NODES = 20_000  # a real manifest has a few hundred
_MAX_LIST = 256  # entries of any list field (command, env, context labels)
_MAX_TEXT = 4096  # characters of any string field (paths, command words, labels, descriptions)
_Text = Annotated[str, Field(max_length=_MAX_TEXT)]


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

    read: Annotated[list[_Text], Field(max_length=_MAX_LIST)] | Literal["all", "own"] = Field(default_factory=list)
    write: Annotated[list[_Text], Field(max_length=_MAX_LIST)] | Literal["all", "own"] = Field(default_factory=list)


class SessionPermission(_Model):
    send_message: bool = False
    metadata: bool = False


class Permissions(_Model):
    workspace: Literal["none", "read", "read-write"] = "none"
    messages: Literal["none", "read"] = "none"
    context: ContextPermission = Field(default_factory=ContextPermission)
    session: SessionPermission = Field(default_factory=SessionPermission)
    network: list[str] = Field(
        default_factory=list,
        description="Hosts the extension may reach through its egress proxy: 'host', 'host:port', '*.domain[:port]', "
        "an IP literal ('203.0.113.7', '[2001:db8::1]:8443'); default port 443; empty: no network at all",
    )

    turn_config: list[str] = Field(
        default_factory=lambda: list(SCALAR_FIELDS),
        description="TurnConfig fields beforeTurn may set (default: the scalars). messages, headers and "
        "providerOptions only when listed; model, tools and stopWhen never.",
        json_schema_extra={"items": {"type": "string", "enum": list(GRANTABLE_FIELDS)}, "default": list(SCALAR_FIELDS)},
    )

    @field_validator("network")
    @classmethod
    def _network_entries(cls, value: list[str]) -> list[str]:
        from ..sandbox._egress_policy import EgressEntryError, parse_entry

        for i, entry in enumerate(value):
            try:
                parse_entry(entry)
            except EgressEntryError as exc:
                raise ValueError(f"entry {i}: {exc}") from None
        return value

    @field_validator("turn_config")
    @classmethod
    def _turn_config_names(cls, value: list[str]) -> list[str]:
        return check_grant_names(value)

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
    phase: Literal["mutate", "validate"] | None = Field(
        default=None,
        description="beforeToolCall deciders only (default validate): mutators (allow with a new input, substitute) "
        "run first, in load order, each seeing the input the one before left; then validators judge the final input "
        "and may block (a validator's input change is refused)",
    )
    mode: Literal["enforce", "shadow"] | None = Field(
        default=None,
        description="This hook only (default: the extension's `mode`): shadow runs it live but applies nothing; "
        "what it would have set, blocked or substituted is traced",
    )


_NO_POLICY = HookPolicy()  # the policy of a hook the manifest says nothing about (frozen: shared)


class Limits(_Model):
    memory_mb: int = Field(
        default=512, ge=128, le=65_536,
        description="Memory of the extension's whole process tree (a memory cgroup), or of each process "
        "(RLIMIT_DATA) where no memory cgroup can be made; below ~128 MB gRPC crashes"
    )
    cpu_seconds: int = Field(default=300, gt=0, le=86_400)
    open_files: int = Field(default=256, ge=16, le=65_536)
    processes: int = Field(default=64, ge=1, le=4_096)
    scratch_mb: int = Field(default=64, ge=1, le=4096, description="Size cap of the scratch dir (a tmpfs in the sandbox)")
    egress_connections: int = Field(default=32, ge=1, le=1024,
                                    description="Egress proxy: connections open at once (permissions.network)")
    egress_mb: int = Field(default=1024, ge=1, le=1024 * 1024,
                           description="Egress proxy: MB through the proxy (both directions) while loaded")
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
    start_ms: int = Field(default=10_000, gt=0, le=300_000, description="Spawn to handshake")
    hook_ms: int = Field(default=5_000, gt=0, le=600_000, description="Default per-hook deadline")
    tool_ms: int = Field(default=60_000, gt=0, le=3_600_000, description="Per tool call")
    shutdown_ms: int = Field(default=2_000, ge=0, le=60_000, description="Grace before SIGKILL")
    health_interval_ms: int = Field(
        default=5_000, ge=0, le=3_600_000, description="How often the host checks the extension still answers; 0: never"
    )
    health_timeout_ms: int = Field(default=2_000, gt=0, le=60_000, description="Deadline of one health check")
    health_failures: int = Field(default=3, ge=1, le=100, description="Misses in a row that count as a crash")


class Observations(_Model):
    """How observations (afterToolCall, onStepFinish, onChunk, observe-only beforeToolCall) reach the extension."""

    max_delay_ms: int = Field(
        default=100, ge=0, le=10_000,
        description="How long observations may be held back to share one frame. The turn's last ones are sent "
        "(and waited for) when the turn ends, and an awaited hook or tool call sends what is held first. "
        "Lower it for live per-chunk reactions; 0 sends each at once.",
    )


class Restart(_Model):
    max_crashes: int = Field(default=3, ge=1, le=100, description="Quarantine after this many crashes ...")
    window_seconds: float = Field(default=300, gt=0, le=86_400, description="... within this many seconds")
    backoff_ms: int = Field(default=200, ge=0, le=600_000, description="First restart delay; doubles per crash")
    max_backoff_ms: int = Field(default=10_000, ge=0, le=3_600_000)


class Tls(_Model):
    ca_file: _Text | None = None
    cert_file: _Text | None = None
    key_file: _Text | None = None
    server_name: _Text | None = None


class Manifest(_Model):
    """An extension manifest (YAML or JSON). Exactly one of `command` and `endpoint`."""

    name: str = Field(min_length=1, max_length=128)
    version: str = Field(default="0.0.0", max_length=64)
    description: _Text = ""
    command: list[_Text] | None = Field(default=None, min_length=1, max_length=_MAX_LIST)
    cwd: _Text | None = Field(default=None, description="Working directory; default: the manifest's directory")
    endpoint: _Text | None = Field(default=None, description="A remote gRPC target instead of a command")
    tls: Tls | None = None
    token: _Text | None = Field(
        default=None,
        description="endpoint only: the token the remote extension expects. A command's token is generated by "
        "the host for each process it starts (unpredictable, never written anywhere a sibling could read it).",
    )
    permissions: Permissions = Field(default_factory=Permissions)
    hooks: dict[HookName, HookPolicy] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    observations: Observations = Field(default_factory=Observations)
    restart: Restart = Field(default_factory=Restart)
    env: list[_Text] = Field(
        default_factory=list, max_length=_MAX_LIST, description="Host environment variables passed through by name"
    )
    mode: Literal["enforce", "shadow"] = Field(
        default="enforce",
        description="shadow: every hook runs live but nothing it returns is applied (beforeTurn fields, decisions, "
        "denials are traced as 'would set / would block / would substitute'); a hook's own `mode` wins",
    )
    # Where the manifest was read from (not part of the file).
    source: str | None = Field(default=None, exclude=True)

    @field_validator("name")
    @classmethod
    def _name_has_letters(cls, value: str) -> str:
        sanitize_name(value)
        return value

    @field_validator("token")
    @classmethod
    def _token_only_for_endpoints(cls, value: str | None, info: ValidationInfo) -> str | None:
        # A token written in a command manifest is readable by whoever reads the file (a sibling extension,
        # another user): the host generates one per started process instead.
        if value is not None and info.data.get("command") is not None:
            raise ValueError(
                "`token` is for `endpoint` manifests only; the host generates the token of a process it starts"
            )
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
            check_phase(hook, pol.phase, pol.decisions)
        return self

    @property
    def tool_prefix(self) -> str:
        return sanitize_name(self.name)

    def hook_policy(self, hook: str) -> HookPolicy:
        return self.hooks.get(hook) or _NO_POLICY  # type: ignore[call-overload]

    def hook_mode(self, hook: str) -> Literal["enforce", "shadow"]:
        """enforce or shadow for `hook`: the hook's own `mode`, else the extension's."""
        return self.hook_policy(hook).mode or self.mode

    def tool_phase(self) -> Literal["mutate", "validate"]:
        """The phase of this extension's beforeToolCall decisions (default validate)."""
        return self.hook_policy("beforeToolCall").phase or "validate"

    def hook_timeout_s(self, hook: str) -> float:
        ms = self.hook_policy(hook).timeout_ms or self.timeouts.hook_ms
        return ms / 1000.0

    def base_dir(self) -> Path:
        return Path(self.source).resolve().parent if self.source else Path.cwd()

    def working_dir(self) -> Path:
        base = self.base_dir()
        return (base / self.cwd).resolve() if self.cwd else base


def check_phase(hook: str, phase: str | None, decisions: bool) -> None:
    """A phase belongs to a beforeToolCall decider only (the field path goes in the error)."""
    if phase is None:
        return
    if hook != "beforeToolCall":
        raise ValueError(f"hooks.{hook}.phase: only beforeToolCall has phases (mutate, validate)")
    if not decisions:
        raise ValueError("hooks.beforeToolCall.phase: needs `decisions: true` (an observer neither mutates nor "
                         "validates)")


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-"))]
    return ".".join(parts) or "(top level)"


def _too_many_nodes(data: Any) -> bool:
    """More than MAX_YAML_NODES values in all (walked iteratively: deep nesting cannot overflow the stack)."""
    stack, seen = [data], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_manifest(data: Any, source: str | None = None) -> Manifest:
    """Validate an already-parsed manifest mapping. Raises ManifestError naming the source and field."""
    if not isinstance(data, dict):
        raise ManifestError(source, None, f"a manifest is a mapping, got {type(data).__name__}")
    if _too_many_nodes(data):  # bounds the validation work (pydantic builds one error per unknown key)
        raise ManifestError(source, None, f"more than {MAX_YAML_NODES} values: not a manifest")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _field_path(first["loc"])
        reason = first["msg"].removeprefix("Value error, ")
        if not first["loc"] and (named := re.fullmatch(r"(hooks\.\w+\.\w+): (.*)", reason, re.S)):
            field, reason = named.group(1), named.group(2)  # a cross-field rule names its own field
        more = len(exc.errors()) - 1
        if more:
            reason += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ManifestError(source, field, reason) from None
    return manifest.model_copy(update={"source": source})


class _NoAliasLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses aliases (`*name`, also `<<: *name`: their expansion is unbounded) and stops
    after MAX_YAML_NODES nodes (pure-Python PyYAML needs ~30 s for 1 MiB of one-character list items)."""

    _nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_YAML_NODES} YAML nodes: not a manifest", self.peek_event().start_mark
            )
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"YAML aliases (*{event.anchor}) are not allowed in a manifest", event.start_mark
            )
        return super().compose_node(parent, index)


def _read_capped(path: Path) -> bytes:
    """The file's bytes, refusing more than MAX_MANIFEST_BYTES without reading them all (also for a FIFO)."""
    with path.open("rb") as fh:
        data = fh.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            str(path), None, f"the file is larger than {MAX_MANIFEST_BYTES} bytes (the manifest size cap)"
        )
    return data


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest file (.yaml, .yml or .json) of at most MAX_MANIFEST_BYTES."""
    path = Path(path)
    name = str(path)
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        text = _read_capped(path).decode("utf-8")
    except FileNotFoundError:
        raise ManifestError(name, None, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(name, None, f"cannot read: {exc}") from None
    try:
        data = json.loads(text) if kind == "JSON" else yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - safe
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ManifestError(name, None, f"not valid {kind}: {exc}") from None
    except RecursionError:
        raise ManifestError(name, None, f"not valid {kind}: nested too deeply") from None
    return parse_manifest(data, source=str(path.resolve()))


def manifest_json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (camelCase field names, as written in manifest files)."""
    schema = Manifest.model_json_schema(by_alias=True, mode="validation")
    schema["properties"].pop("source", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "hookwire extension manifest"
    return schema
