"""The loaded extensions, in load order, with the indexes dispatch reads on every call.

`changed()` must follow every change of an extension's state, hooks or tools: it rebuilds the tool index and
drops the per-hook subscriber lists (rebuilt on first use, so the per-chunk path never scans every extension).
"""

from __future__ import annotations

from ._state import ExtensionRuntime


class Registry:
    """Extensions by name (load order), their tools by exposed name, and the prefixes of unloaded ones."""

    def __init__(self) -> None:
        self.exts: dict[str, ExtensionRuntime] = {}
        self.unloaded: set[str] = set()  # tool prefixes of unloaded extensions
        self.closed = False  # the manager was closed: nothing starts or restarts any more
        self._tool_index: dict[str, tuple[ExtensionRuntime, str]] = {}
        self._sub_cache: dict[str, list[ExtensionRuntime]] = {}

    def changed(self) -> None:
        self._sub_cache = {}
        self._tool_index = {full: (ext, tool.tool) for ext in self.exts.values() for full, tool in ext.tools.items()}

    def subscribers(self, hook: str) -> list[ExtensionRuntime]:
        """The extensions serving `hook`, in load order (whatever their state: callers check it)."""
        subs = self._sub_cache.get(hook)
        if subs is None:
            subs = [ext for ext in self.exts.values() if hook in ext.hooks]
            self._sub_cache[hook] = subs
        return subs

    def tool(self, name: str) -> tuple[ExtensionRuntime, str] | None:
        """(extension, its own tool name) for an exposed tool name."""
        return self._tool_index.get(name)

    def tool_names(self) -> list[str]:
        return list(self._tool_index)

    def unloaded_owner(self, name: str) -> str | None:
        """The tool prefix of an unloaded extension that `name` belonged to, if any."""
        return next((prefix for prefix in self.unloaded if name.startswith(prefix + "_")), None)

    def is_loaded(self, ext: ExtensionRuntime) -> bool:
        return self.exts.get(ext.name) is ext
