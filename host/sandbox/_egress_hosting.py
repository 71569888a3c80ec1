"""The extension manager's egress proxies: one per loaded extension with a `permissions.network` host list.

Invariants:
  - a proxy is started (once per load, kept across restarts) before its extension's process is planned, so the
    relay inside the sandbox has a socket to forward to from the first connection on;
  - while an extension (re)starts the proxy serves nobody: `bound(name, pid)` names the process whose network
    namespace it then serves;
  - an egress connection opened during one of the extension's awaited hook or tool calls becomes a TraceEvent
    (`hook: "egress"`) with that call's context; every one is audited by the proxy itself (hookwire.audit);
  - `close(name)` stops the proxy when the extension is stopped (unload, close, failed load).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..extensions._manifest import Manifest
from ._egress_proxy import EgressEvent, EgressProxy

#: trace(hook, extension, outcome, latency_ms=..., detail=..., context=...) — the manager's _trace
TraceFn = Callable[..., None]


class EgressProxies:
    """The egress proxies of one ExtensionManager, by extension name."""

    def __init__(self, trace: TraceFn, resolver: Mapping[str, str | Sequence[str]] | None = None) -> None:
        self._trace = trace
        self._resolver = resolver
        self._proxies: dict[str, EgressProxy] = {}

    def get(self, name: str) -> EgressProxy | None:
        return self._proxies.get(name)

    async def socket_for(self, manifest: Manifest, prefix: str, runtime_dir: Path, mode: str) -> Path | None:
        """Start the extension's proxy if it needs one (a host list, a sandbox); its socket path, or None."""
        if not manifest.permissions.network or mode == "off":
            return None
        proxy = self._proxies.get(manifest.name)
        if proxy is None:
            limits = manifest.limits
            proxy = EgressProxy(
                manifest.name, list(manifest.permissions.network), runtime_dir / f"{prefix[:24]}-egress.sock",
                resolver=self._resolver, max_connections=limits.egress_connections,
                max_bytes=limits.egress_mb * 1024 * 1024, require_peer=True,
                on_event=lambda event, call, name=manifest.name: self._event(name, event, call),
            )
            await proxy.start()
            self._proxies[manifest.name] = proxy
        proxy.bind_peer(None)  # (re)starting: only the new process's namespace will be served
        return proxy.socket_path

    def bound(self, name: str, pid: int) -> None:
        """The extension's process is `pid`: serve connections from its network namespace."""
        if (proxy := self._proxies.get(name)) is not None:
            proxy.bind_peer(pid)

    def serves(self, name: str) -> bool:
        """Whether extension `name` has an egress proxy (else `during` is a no-op for it)."""
        return bool(self._proxies) and name in self._proxies

    def during(self, name: str, context: Any) -> contextlib.AbstractContextManager[None]:
        """Attribute the extension's egress connections opened within this block to `context` (a CallContext)."""
        proxy = self._proxies.get(name) if self._proxies else None
        return proxy.during(context) if proxy is not None and context is not None else contextlib.nullcontext()

    async def close(self, name: str) -> None:
        if (proxy := self._proxies.pop(name, None)) is not None:
            await proxy.close()

    def _event(self, name: str, event: EgressEvent, call: Any) -> None:
        if call is None:
            return  # audited by the proxy; not attributable to a turn
        verdict = "allowed" if event.allowed else "refused"
        detail = f"{event.host}:{event.port} {verdict}, up {event.bytes_up} B, down {event.bytes_down} B"
        self._trace("egress", name, "ok" if event.allowed else "denied", latency_ms=event.duration_ms,
                    detail=f"{detail}: {event.reason}" if event.reason else detail, context=call)
