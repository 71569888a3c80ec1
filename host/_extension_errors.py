"""Exceptions raised by the extension manager (each message names the extension)."""

from __future__ import annotations


class ExtensionError(RuntimeError):
    """Base class of the extension manager's errors. `extension` names the extension, when known."""

    def __init__(self, message: str, *, extension: str | None = None) -> None:
        super().__init__(message)
        self.extension = extension


class ExtensionStartError(ExtensionError):
    """An extension could not be started: spawn failure, bad handshake, timeout, wrong protocol version."""

    def __init__(self, message: str, *, extension: str | None = None, manifest: str | None = None) -> None:
        super().__init__(message, extension=extension)
        self.manifest = manifest


class ExtensionToolError(ExtensionError):
    """An extension tool reported an error (the model sees it as a tool error)."""


class ExtensionUnloadedError(ExtensionError):
    """The extension a tool (or call) belongs to has been unloaded."""


class ExtensionUnavailableError(ExtensionError):
    """The extension is down (crashed, restarting) or quarantined; the call failed fast."""


class ExtensionReplyError(ExtensionError):
    """An extension's reply was rejected whole (wrong kind, undecodable, oversize); `hook` and `field` name what."""

    def __init__(self, message: str, *, extension: str | None = None, hook: str = "", field: str = "") -> None:
        super().__init__(message, extension=extension)
        self.hook = hook
        self.field = field
