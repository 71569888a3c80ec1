"""Tools the model can call: the ``tool`` decorator and the ``Tool`` model.

A tool wraps a sync function, an async function or an async generator (a streaming tool: every yielded value is
a preliminary result, the last one is the final output). A tool without a function is a client-side tool: the
model may call it, the turn ends with the call pending, and ``Agent.add_tool_result`` completes it.

How the function receives the model's input (decided once, when the tool is declared):

- ``parameters`` is a JSON-schema dict and the function takes one parameter: it gets the input dict, as an SDK
  tool does (``def echo(args): return args["text"]``);
- ``parameters`` is a pydantic model and the function takes one parameter: it gets the validated instance;
- otherwise each input property is a keyword argument (``def add(a: int, b: int = 1)``, whose schema is derived
  from the signature when ``parameters`` is not given).

A function that cannot be called either way (say, two parameters while the schema has no such properties) is
refused when the tool is declared, with a TypeError that names the tool and what it expected.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from .._errors import ToolInputError

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _schema_from_signature(fn: Callable[..., Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(name)
        origin = typing.get_origin(hint) or hint
        json_type = _JSON_TYPES.get(origin)
        props[name] = {"type": json_type} if json_type else {}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _call_style(func: Callable[..., Any], name: str, schema: dict[str, Any], explicit: bool,
                input_model: type[BaseModel] | None) -> str:
    """How `func` receives the input: "input" (the dict, or the model instance, as its one argument) or "kwargs".

    Raises TypeError when the signature can receive the input neither way."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return "input"  # a builtin or C callable: hand it the input as it is
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    props = list((schema.get("properties") or {}).keys()) if isinstance(schema, dict) else []
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    one_arg = len(required) <= 1 and (len(positional) >= 1 or any(p.kind == p.VAR_POSITIONAL for p in params))
    if input_model is not None and one_arg:
        return "input"
    if explicit and one_arg and not (len(positional) == 1 and positional[0].name in props):
        return "input"
    if var_kw or all(p.name in props for p in required) and (not explicit or names & set(props) or not props):
        return "kwargs"
    if one_arg:
        return "input"
    raise TypeError(
        f"tool {name!r}: the function's parameters ({', '.join(p.name for p in params)}) cannot receive the "
        f"input: take one parameter for the input dict (def {name}(args)), or one keyword parameter per "
        f"property ({', '.join(props) or 'none declared'})"
    )


def _check_against_schema(schema: dict[str, Any], value: Any, tool_name: str) -> None:
    """A light check of the model's input (object, required keys, primitive types)."""
    if schema.get("type") not in (None, "object"):
        return
    if not isinstance(value, dict):
        raise ToolInputError(f'Invalid input for tool "{tool_name}": expected an object, got {type(value).__name__}')
    for key in schema.get("required", []) or []:
        if key not in value:
            raise ToolInputError(f'Invalid input for tool "{tool_name}": missing required property "{key}"')
    checks: dict[str, tuple[type, ...]] = {
        "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,), "object": (dict,)
    }
    for key, prop in (schema.get("properties") or {}).items():
        if key not in value or not isinstance(prop, dict) or prop.get("type") not in checks:
            continue
        item = value[key]
        bad_bool = isinstance(item, bool) and prop["type"] in ("integer", "number")
        if not isinstance(item, checks[prop["type"]]) or bad_bool:
            raise ToolInputError(
                f'Invalid input for tool "{tool_name}": property "{key}" should be {prop["type"]}, got {item!r}'
            )


class Tool(BaseModel):
    """A tool the model can call. ``execute=None`` makes it a client-side tool."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    execute: Callable[..., Any] | None = None
    dynamic: bool = False  # true for runtime-registered tools (extensions)
    streaming: bool = False
    _input_model: type[BaseModel] | None = PrivateAttr(default=None)
    _kwargs_call: bool = PrivateAttr(default=True)  # else the input is the one positional argument

    def validate_input(self, value: Any) -> Any:
        """The model's input, validated (raises ToolInputError)."""
        if self._input_model is not None:
            try:
                self._input_model.model_validate(value)
            except ValidationError as exc:
                raise ToolInputError(f'Invalid input for tool "{self.name}": {exc}') from exc
            return value
        _check_against_schema(self.parameters, value, self.name)
        return value

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def _call(self, value: Any) -> Any:
        assert self.execute is not None
        if self._input_model is not None and isinstance(value, dict):
            try:
                value = self._input_model.model_validate(value)
            except ValidationError:
                pass  # substituted input is not revalidated: hand it over as it is
            else:
                return self.execute(value)
        if self._kwargs_call and isinstance(value, dict):
            return self.execute(**value)
        return self.execute(value)

    async def run(self, value: Any, on_preliminary: Callable[[Any], Any] | None = None) -> Any:
        """Execute with ``value`` (no validation). Async generators stream preliminaries; returns the final."""
        if self.execute is None:
            raise RuntimeError(f'Tool "{self.name}" has no execute function (it is a client-side tool)')
        result = self._call(value)
        if inspect.isasyncgen(result):
            return await _drain(result, on_preliminary)
        if inspect.isawaitable(result):
            result = await result
            if isinstance(result, AsyncIterable):  # an async tool that returned an async iterable: its last value
                return await _drain(result, None)  # (Think's reduction; no preliminaries, it was not a generator)
        return result


async def _drain(gen: AsyncIterator[Any], on_preliminary: Callable[[Any], Any] | None) -> Any:
    last: Any = None
    async for value in gen:
        last = value
        if on_preliminary is not None:
            maybe = on_preliminary(value)
            if inspect.isawaitable(maybe):
                await maybe
    return last


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    description: str | None = None,
    parameters: dict[str, Any] | type[BaseModel] | None = None,
    name: str | None = None,
) -> Any:
    """Make a Tool of a function: ``@tool``, ``@tool(description=..., parameters=...)`` or ``tool(fn, ...)``.

    With ``parameters`` given and a one-parameter function, the function receives the input dict (or, for a
    pydantic model, the validated instance); otherwise the input's properties as keyword arguments. A signature
    that can receive the input neither way raises TypeError here (see the module docstring).
    """

    def make(func: Callable[..., Any]) -> Tool:
        input_model: type[BaseModel] | None = None
        if isinstance(parameters, type) and issubclass(parameters, BaseModel):
            input_model = parameters
            schema = parameters.model_json_schema()
        elif isinstance(parameters, dict):
            schema = parameters
        else:
            schema = _schema_from_signature(func)
        t = Tool(
            name=name or getattr(func, "__name__", ""),
            description=description if description is not None else inspect.getdoc(func) or "",
            parameters=schema,
            execute=func,
            streaming=inspect.isasyncgenfunction(func),
        )
        t._input_model = input_model
        t._kwargs_call = _call_style(func, t.name, schema, parameters is not None, input_model) == "kwargs"
        return t

    if fn is not None:
        return make(fn)
    return make


def as_tool(name: str, value: Any) -> Tool:
    """Normalise what get_tools() returns: a Tool, a plain function, or a dict {description, parameters, execute}."""
    if isinstance(value, Tool):
        t = value.model_copy()
        t._input_model = value._input_model
        t._kwargs_call = value._kwargs_call
        t.name = name
        return t
    if isinstance(value, dict):
        execute = value.get("execute")
        explicit = value.get("parameters") or value.get("input_schema")
        t = Tool(
            name=name,
            description=value.get("description", ""),
            parameters=explicit or {"type": "object", "properties": {}},
            execute=execute,
        )
        t.streaming = execute is not None and inspect.isasyncgenfunction(execute)
        if execute is not None:
            t._kwargs_call = _call_style(execute, name, t.parameters, explicit is not None, None) == "kwargs"
        return t
    if callable(value) and not isinstance(value, types.BuiltinFunctionType):
        t = tool(value, name=name)
        return t
    raise TypeError(f'get_tools(): tool "{name}" must be a host.Tool, a function or a dict, got {type(value).__name__}')
