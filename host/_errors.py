"""Every public exception of the host, in one place. Each says when it is raised; messages name the culprit.

    Exception
    ├── ValueError
    │   ├── ManifestError            a manifest is unreadable or invalid (.file, .field, .reason)
    │   ├── EgressEntryError         a permissions.network entry is invalid
    │   └── ToolInputError           the model's input does not match a host tool's schema
    ├── RuntimeError
    │   ├── ExtensionError           base of everything an extension did or could not do (.extension)
    │   │   ├── ExtensionStartError      it could not be started (.manifest)
    │   │   │   └── ToolNameCollision        two owners would expose a tool under one name
    │   │   ├── ExtensionToolError       its tool failed, timed out or does not exist
    │   │   ├── ExtensionUnloadedError   "you unloaded it": the call's extension was unloaded by the host
    │   │   ├── ExtensionUnavailableError "it broke": crashed, restarting, quarantined, or went away mid-call
    │   │   └── ExtensionReplyError      a reply was rejected whole (.hook, .field)
    │   ├── SandboxUnavailable       sandbox="required", but a layer the extension needs can't be enforced here
    │   ├── StoreError               the message store failed
    │   │   └── StoreVersionError        the store file was written by a newer hookwire
    │   └── NestedTurnError          a turn was started from inside a hook or tool of the running turn
    └── TimeoutError
        └── ChatStreamStallError     the model stream produced no chunk within the stall timeout

Unloaded vs Unavailable is trio's Closed vs Broken: `ExtensionUnloadedError` is the caller's own doing (the
extension was unloaded, so retrying is pointless); `ExtensionUnavailableError` is the extension's failure (a
restart may bring it back; `ExtensionManager.extensions()` shows its state).

What the host does NOT raise: an extension's hook failing (error, timeout, bad value) never raises into a turn;
it is logged, traced and listed in `ChatResponseResult.failed_open` (or blocks, where policy says fail closed).
`host.extensions._tool_call.map_rpc_errors` is the one place gRPC errors become these classes.
"""

from __future__ import annotations


class ManifestError(ValueError):
    """Raised by load_manifest/parse_manifest (and ExtensionManager.load): a manifest could not be read or is
    invalid. `file`, `field` and `reason` say where and why."""

    def __init__(self, file: str | None, field: str | None, reason: str) -> None:
        self.file = file
        self.field = field
        self.reason = reason
        where = ": ".join(p for p in (file, field) if p)
        super().__init__(f"{where}: {reason}" if where else reason)


class EgressEntryError(ValueError):
    """Raised when a `permissions.network` entry is not valid; the message names the entry and why."""


class ToolInputError(ValueError):
    """Raised (and shown to the model as the tool's error) when the model's input does not match the schema."""


class ExtensionError(RuntimeError):
    """Base class of the extension manager's errors. `extension` names the extension, when known."""

    def __init__(self, message: str, *, extension: str | None = None) -> None:
        super().__init__(message)
        self.extension = extension


class ExtensionStartError(ExtensionError):
    """Raised by load/load_all: spawn failure, bad handshake, timeout, wrong protocol version, refused sandbox."""

    def __init__(self, message: str, *, extension: str | None = None, manifest: str | None = None) -> None:
        super().__init__(message, extension=extension)
        self.manifest = manifest


class ToolNameCollision(ExtensionStartError):
    """Raised at load or Agent.start: two owners (host / extensions) would expose a tool under the same name."""


class ExtensionToolError(ExtensionError):
    """Raised by execute_tool: the tool reported an error, timed out, or no such tool exists."""


class ExtensionUnloadedError(ExtensionError):
    """Raised by a call whose extension has been unloaded (the host's doing: do not retry)."""


class ExtensionUnavailableError(ExtensionError):
    """Raised by a call whose extension is down (crashed, restarting, quarantined) or went away during it."""


class ExtensionReplyError(ExtensionError):
    """An extension's reply was rejected whole (wrong kind, undecodable, oversize); `hook` and `field` name what."""

    def __init__(self, message: str, *, extension: str | None = None, hook: str = "", field: str = "") -> None:
        super().__init__(message, extension=extension)
        self.hook = hook
        self.field = field


class SandboxUnavailable(RuntimeError):
    """Raised by plan_launch (and load, as ExtensionStartError): sandbox mode "required", but a layer the extension
    needs cannot be enforced here. `extension`, `layer` and `reason` say which and why."""

    def __init__(self, extension: str, layer: str, reason: str, mode: str = "required") -> None:
        self.extension = extension
        self.layer = layer
        self.reason = reason
        super().__init__(
            f"extension {extension!r}: sandbox mode is {mode!r} but layer {layer!r} cannot be enforced: {reason}"
        )


class StoreError(RuntimeError):
    """Raised by the message store: closed store, invalid message, unknown submission, ..."""


class StoreVersionError(StoreError):
    """Raised when opening a store file written by a newer hookwire (its schema version is higher)."""


class NestedTurnError(RuntimeError):
    """Raised when a turn is started from inside a hook (or tool) of the running turn of the same agent."""


class ChatStreamStallError(TimeoutError):
    """The model stream produced no chunk within chat_stream_stall_timeout_ms (the turn ends with an error)."""


__all__ = [
    "ChatStreamStallError",
    "EgressEntryError",
    "ExtensionError",
    "ExtensionReplyError",
    "ExtensionStartError",
    "ExtensionToolError",
    "ExtensionUnavailableError",
    "ExtensionUnloadedError",
    "ManifestError",
    "NestedTurnError",
    "SandboxUnavailable",
    "StoreError",
    "StoreVersionError",
    "ToolInputError",
    "ToolNameCollision",
]
