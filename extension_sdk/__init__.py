"""hookwire extension SDK: write an extension as a few decorated Python functions.

    from extension_sdk import Extension

    ext = Extension("greeter", "1.0.0", description="Greets people")

    @ext.tool(description="Greets someone",
              parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    def greet(args, host):
        return f"Hello, {args['name']}!"

    @ext.hook("beforeTurn")
    def tune(snapshot, host):
        return {"maxSteps": 42}

    if __name__ == "__main__":
        ext.serve()

Depends only on grpcio, grpcio-health-checking, protobuf, pydantic (results by its JSON mode) and jsonschema
(tool schemas checked when declared); installed as the `hookwire-sdk` distribution. Generated protocol modules
live in `extension_sdk.proto` (the .proto files too, in an installed SDK). Test an extension without a host with
`extension_sdk.testing`.
"""

__version__ = "0.1.0"

from ._bridge_client import Host, HostError, SyncHost
from ._call_context import CallInfo, current_call
from ._extension import Extension, HookDef, ToolDef
from ._grants import Grants
from .proto import HOOK_NAMES, MAGIC_COOKIE

__all__ = [
    "HOOK_NAMES",
    "MAGIC_COOKIE",
    "CallInfo",
    "Extension",
    "Grants",
    "HookDef",
    "Host",
    "HostError",
    "SyncHost",
    "ToolDef",
    "__version__",
    "current_call",
]
