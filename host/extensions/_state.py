"""The state of one loaded extension (`ExtensionRuntime`) and the public views of it (ExtensionInfo, ExtensionTool)."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any, Literal, NamedTuple

import grpc
from pydantic import BaseModel, ConfigDict, Field

from extension_sdk.proto import HOOK_NAMES
from extension_sdk.proto import extension_pb2 as pb

from ..sandbox._cgroups import CgroupLease
from ._extension_client import ExtensionConnection
from ._health import HealthProbe
from ._manifest import Manifest, Permissions
from ._process import ExtensionProcess
from ._supervisor import CrashPolicy

ExtensionState = Literal["starting", "running", "restarting", "quarantined", "stopped"]


class ExtensionInfo(BaseModel):
    """What `ExtensionManager.extensions()` reports about one loaded extension."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str = Field(description="The manifest's version (Think's load() reports the manifest's)")
    extension_version: str = Field(default="", description="The version the extension itself reports in Describe")
    description: str = ""
    state: ExtensionState
    pid: int | None = None
    hooks: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list, description="Namespaced tool names")
    features: list[str] = Field(default_factory=list)
    sandbox: list[str] = Field(default_factory=list, description="Sandbox layers enforced")
    sandbox_missing: list[str] = Field(default_factory=list, description="Layers wanted but not enforced")
    permissions: Permissions = Field(default_factory=Permissions, description="What the manifest grants")
    restarts: int = 0
    crashes: int = 0
    dropped_observations: int = 0
    manifest: str | None = None
    endpoint: str | None = None
    mode: Literal["enforce", "shadow"] = Field(
        default="enforce", description="The manifest's `mode`: shadow runs hooks live but applies nothing")
    hook_modes: dict[str, Literal["enforce", "shadow"]] = Field(
        default_factory=dict, description="The hooks whose own `mode` differs from `mode`, and theirs")
    phase: Literal["mutate", "validate"] | None = Field(
        default=None, description="The phase of its beforeToolCall decisions (None: it makes none)")


class ExtensionTool(BaseModel):
    """One extension tool as exposed to the model."""

    model_config = ConfigDict(frozen=True)

    name: str  # "{sanitize_name(extension)}_{tool}"
    description: str  # "[extension] ..."
    input_schema: dict[str, Any]
    streaming: bool = False
    extension: str
    tool: str


class ToolHookPolicy(NamedTuple):
    """An extension's beforeToolCall policy as the awaited path reads it (from its frozen manifest)."""

    decisions: bool
    mode: Literal["enforce", "shadow"]
    phase: Literal["mutate", "validate"]
    timeout_s: float


class ExtensionRuntime:
    """Runtime state of one loaded extension."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self.prefix = manifest.tool_prefix
        self.manifest_file = manifest.source or "<inline manifest>"
        # A started process gets a fresh unpredictable token; only a remote endpoint's comes from its manifest.
        self.token = manifest.token if manifest.endpoint is not None and manifest.token else secrets.token_urlsafe(32)
        self.state: ExtensionState = "starting"
        self.proc: ExtensionProcess | None = None
        self.conn: ExtensionConnection | None = None
        self.describe: pb.DescribeResponse | None = None
        self.hooks: list[str] = []
        self.tools: dict[str, ExtensionTool] = {}  # by namespaced name
        self.features: list[str] = []
        self.enforced: list[str] = []
        self.missing: list[str] = []
        self.cgroups: CgroupLease | None = None  # the sandbox's cgroups of the current process (removed on exit)
        self.policy = CrashPolicy(manifest.restart)
        self.restarts = 0
        self.generation = 0
        self.scratch_dir: Path | None = None
        self.socket_path: Path | None = None
        self.watcher: asyncio.Task[None] | None = None
        self.restarter: asyncio.Task[None] | None = None
        self.lost_task: asyncio.Task[None] | None = None  # handling a broken connection
        self.health: HealthProbe | None = None
        self.stopping = False
        self.dropped_base = 0  # drops counted by earlier connections
        # beforeToolCall's policy, resolved once (the manifest is frozen): read on every awaited call
        policy = manifest.hook_policy("beforeToolCall")
        self.tool_hook = ToolHookPolicy(decisions=policy.decisions, mode=manifest.hook_mode("beforeToolCall"),
                                        phase=manifest.tool_phase(),
                                        timeout_s=manifest.hook_timeout_s("beforeToolCall"))

    @property
    def deciders(self) -> bool:
        return self.tool_hook.decisions

    def info(self) -> ExtensionInfo:
        d = self.describe
        return ExtensionInfo(
            name=self.name,
            version=self.manifest.version,
            extension_version=d.version if d else "",
            description=self.manifest.description or (d.description if d else ""),
            state=self.state,
            pid=self.proc.pid if self.proc is not None and self.proc.returncode is None else None,
            hooks=list(self.hooks),
            tools=list(self.tools),
            features=list(self.features),
            sandbox=list(self.enforced),
            sandbox_missing=list(self.missing),
            permissions=self.manifest.permissions,
            restarts=self.restarts,
            crashes=self.policy.total_crashes,
            dropped_observations=self.dropped_base + (self.conn.dropped if self.conn else 0),
            manifest=self.manifest.source,
            endpoint=self.manifest.endpoint,
            mode=self.manifest.mode,
            hook_modes={h: m for h in HOOK_NAMES if (m := self.manifest.hook_mode(h)) != self.manifest.mode},
            phase=self.manifest.tool_phase() if self.deciders else None,
        )


def tls_credentials(m: Manifest) -> grpc.ChannelCredentials | None:
    if m.tls is None:
        return None

    def read(path: str | None) -> bytes | None:
        return (m.base_dir() / path).read_bytes() if path else None

    return grpc.ssl_channel_credentials(
        root_certificates=read(m.tls.ca_file), private_key=read(m.tls.key_file), certificate_chain=read(m.tls.cert_file)
    )
