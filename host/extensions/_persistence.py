"""What an ExtensionManager remembers of the extensions it loaded, in a MessageStore, so `restore()` brings them
back after a restart (Think's ExtensionManager persistence).

Kept as the metadata dict of the reserved session id ``hookwire:extensions:<key>``: the load order, and per
extension the manifest file it came from (read again on restore, so an edited manifest takes effect) or, for a
manifest given as a mapping, the manifest itself.
"""

from __future__ import annotations

import logging
from typing import Any

from ._manifest import Manifest, load_manifest, parse_manifest

log = logging.getLogger("hookwire.extensions")

RESERVED_PREFIX = "hookwire:extensions:"


class ExtensionMemory:
    """The remembered extensions of one manager (``store``: a host.MessageStore)."""

    def __init__(self, store: Any, key: str = "default") -> None:
        self._store = store
        self._sid = RESERVED_PREFIX + key

    async def _read(self) -> dict[str, Any]:
        data = await self._store.get_meta(self._sid)
        return {"order": list(data.get("order") or []), "entries": dict(data.get("entries") or {})}

    async def remember(self, manifests: list[Manifest]) -> None:
        data = await self._read()
        for m in manifests:
            entry: dict[str, Any] = {"path": m.source} if m.source else {
                "manifest": m.model_dump(mode="json", by_alias=True, exclude_none=True)}
            data["entries"][m.name] = entry
            if m.name not in data["order"]:
                data["order"].append(m.name)
        await self._store.set_meta(self._sid, data)

    async def forget(self, name: str) -> None:
        data = await self._read()
        if name in data["entries"] or name in data["order"]:
            data["entries"].pop(name, None)
            data["order"] = [n for n in data["order"] if n != name]
            await self._store.set_meta(self._sid, data)

    async def manifests(self) -> list[tuple[str, Manifest | None]]:
        """(name, manifest) in load order; None where the manifest can no longer be read (logged)."""
        data = await self._read()
        out: list[tuple[str, Manifest | None]] = []
        for name in data["order"]:
            entry = data["entries"].get(name) or {}
            try:
                if "path" in entry:
                    out.append((name, load_manifest(entry["path"])))
                else:
                    out.append((name, parse_manifest(entry.get("manifest"), source=None)))
            except Exception as exc:
                log.error("restore: extension %r can't be restored: %s", name, exc)
                out.append((name, None))
        return out
