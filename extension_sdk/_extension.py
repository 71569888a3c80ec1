"""The `Extension` registry: tools and hooks declared with decorators, then `serve()`."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._grants import Grants
from .proto import HOOK_NAMES

F = TypeVar("F", bound=Callable[..., Any])


def _wants_host(fn: Callable[..., Any]) -> bool:
    """True when the handler takes a second positional argument (`host`)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def _is_model_class(value: Any) -> bool:
    return isinstance(value, type) and callable(getattr(value, "model_json_schema", None))


@dataclass(frozen=True)
class ToolDef:
    """One registered tool."""

    name: str
    description: str
    fn: Callable[..., Any]
    schema: dict[str, Any]
    model: Any  # a pydantic model class validating the input, or None
    wants_host: bool
    is_async: bool
    streaming: bool  # an (async) generator: yields preliminaries, the last value is the output
    is_async_gen: bool


@dataclass(frozen=True)
class HookDef:
    """One registered hook handler."""

    name: str
    fn: Callable[..., Any]
    wants_host: bool
    is_async: bool


class Extension:
    """A hookwire extension: register tools and hooks, then `serve()`.

        ext = Extension("greeter", "1.0.0", description="Greets people")

        @ext.tool(description="Greets someone", parameters={"type": "object", ...})
        def greet(args, host): return f"Hello, {args['name']}!"

        @ext.hook("beforeTurn")
        def tune(snapshot, host): return {"maxSteps": 42}

        if __name__ == "__main__":
            ext.serve()
    """

    def __init__(self, name: str, version: str = "0.0.0", *, description: str = "") -> None:
        if not name or not name.strip():
            raise ValueError("Extension name must not be empty")
        self.name = name
        self.version = version
        self.description = description
        self.tools: dict[str, ToolDef] = {}
        self.hooks: dict[str, HookDef] = {}
        # What the host says the manifest grants (DescribeRequest.granted); None until the host has described it.
        self.granted: Grants | None = None

    def tool(
        self,
        name: str | None = None,
        *,
        description: str = "",
        parameters: dict[str, Any] | type | None = None,
    ) -> Callable[[F], F]:
        """Register a tool. `parameters` is a JSON Schema dict or a pydantic model class.

        The handler takes `(args)` or `(args, host)`; it may be sync (run in a worker thread), async,
        or an async generator (each yielded value but the last is a preliminary result).
        With a pydantic model, `args` is a validated instance of it. A dict is checked against the JSON Schema
        meta-schema here (ValueError naming the wrong field). The result is converted to JSON with pydantic's
        JSON mode (datetime, Decimal, UUID, bytes, sets, dataclasses, models); a value with no JSON form, or
        one over the 16 MiB reply limit, is that call's error.
        """
        if callable(name) and not isinstance(name, str):
            raise TypeError(f"extension {self.name!r}: use @ext.tool(...) with parentheses")

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            if tool_name in self.tools:
                raise ValueError(f"extension {self.name!r} already has a tool named {tool_name!r}")
            model = parameters if _is_model_class(parameters) else None
            if model is not None:
                schema: dict[str, Any] = model.model_json_schema()
            elif parameters is None:
                schema = {"type": "object", "properties": {}}
            elif isinstance(parameters, dict):
                from ._schema_check import check_tool_schema

                check_tool_schema(self.name, tool_name, parameters)
                schema = parameters
            else:
                raise TypeError(
                    f"extension {self.name!r}, tool {tool_name!r}: parameters must be a JSON Schema dict "
                    f"or a pydantic model class, got {type(parameters).__name__}"
                )
            is_async_gen = inspect.isasyncgenfunction(fn)
            self.tools[tool_name] = ToolDef(
                name=tool_name,
                description=description or (inspect.getdoc(fn) or "").strip(),
                fn=fn,
                schema=schema,
                model=model,
                wants_host=_wants_host(fn),
                is_async=inspect.iscoroutinefunction(fn),
                streaming=is_async_gen or inspect.isgeneratorfunction(fn),
                is_async_gen=is_async_gen,
            )
            return fn

        return register

    def hook(self, name: str) -> Callable[[F], F]:
        """Register a hook handler: beforeTurn, beforeToolCall, afterToolCall, onStepFinish or onChunk.

        The handler takes `(snapshot)` or `(snapshot, host)` and may be sync or async. A sync handler runs in a
        worker thread (use `host.sync` there), so a blocking one never holds up the extension's other calls.
        A name that is not a hook raises ValueError listing the valid ones.
        """
        if name not in HOOK_NAMES:
            raise ValueError(
                f"extension {self.name!r}: unknown hook {name!r}; valid hooks are {', '.join(HOOK_NAMES)}"
            )

        def register(fn: F) -> F:
            if name in self.hooks:
                raise ValueError(f"extension {self.name!r} already has a {name} handler")
            self.hooks[name] = HookDef(
                name=name, fn=fn, wants_host=_wants_host(fn), is_async=inspect.iscoroutinefunction(fn)
            )
            return fn

        return register

    def serve(self, argv: list[str] | None = None) -> None:
        """Serve this extension as the host's contract describes; never returns (exits the process)."""
        from ._process import serve

        serve(self, argv)

    async def serve_async(self, *, socket_path: str, token: str | None, host_address: str | None = None) -> int:
        """Serve on `socket_path` until shut down (Shutdown RPC, stdin EOF, SIGTERM); returns the exit code."""
        from ._process import serve_async

        return await serve_async(self, socket_path=socket_path, token=token, host_address=host_address)
