"""Clauses 3.1-3.3: Describe — protocol version, identity, features, hooks and tool schemas."""

from __future__ import annotations

import json

import grpc
from jsonschema import exceptions as schema_errors
from jsonschema import validators

from extension_sdk.proto import HOOK_NAMES, PROTOCOL_VERSION
from extension_sdk.proto import extension_pb2 as pb

from ..extensions._grants import grants_to_proto
from ._kit import Kit

KNOWN_FEATURES = ("connect", "connect-tools", "prelude", "multi-batch")


async def check_describe(kit: Kit) -> bool:
    """Call Describe (with the grants the host would send) and judge it; False when it did not answer."""
    timeout = min(kit.manifest.timeouts.start_ms / 1000, 15.0)
    try:
        desc = await kit.stub.Describe(pb.DescribeRequest(protocol_version=PROTOCOL_VERSION,
                                                          granted=grants_to_proto(kit.manifest)),
                                       metadata=kit.metadata, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        kit.results.failed("3.1", f"Describe failed: {exc.code().name}: {exc.details()}")
        return False
    kit.describe = desc
    _identity(kit, desc)
    _hooks(kit, desc)
    _tools(kit, desc)
    return True


def _identity(kit: Kit, desc: pb.DescribeResponse) -> None:
    problems = []
    if desc.protocol_version != PROTOCOL_VERSION:
        problems.append(f"protocol_version {desc.protocol_version!r}, the host speaks {PROTOCOL_VERSION!r}")
    if not desc.name:
        problems.append("no name")
    if not desc.version:
        problems.append("no version")
    features = list(desc.features)
    for dependent in ("connect-tools", "prelude", "multi-batch"):
        if dependent in features and "connect" not in features:
            problems.append(f"feature {dependent!r} without 'connect'")
    unknown = [f for f in features if f not in KNOWN_FEATURES]
    seen = (f"{desc.name} {desc.version}, protocol {desc.protocol_version!r}, features "
            f"{features or 'none'}" + (f" (unknown to this host, ignored: {unknown})" if unknown else ""))
    if desc.name and desc.name != kit.manifest.name:
        seen += f"; describes itself as {desc.name!r}, the manifest says {kit.manifest.name!r}"
    kit.results.set("3.1", "FAIL" if problems else "PASS", "; ".join(problems) if problems else seen)


def _hooks(kit: Kit, desc: pb.DescribeResponse) -> None:
    hooks = list(desc.hooks)
    unknown = [h for h in hooks if h not in HOOK_NAMES]
    twice = sorted({h for h in hooks if hooks.count(h) > 1})
    if unknown or twice:
        parts = []
        if unknown:
            parts.append(f"unknown hook name(s) {unknown} (valid: {', '.join(HOOK_NAMES)})")
        if twice:
            parts.append(f"listed more than once: {twice}")
        kit.results.failed("3.2", "; ".join(parts))
    else:
        kit.results.passed("3.2", f"hooks: {', '.join(hooks) or 'none'}")


def schema_problem(text: str) -> str | None:
    """Why `text` is not an acceptable tool input schema (a JSON object, valid JSON Schema), or None."""
    if not text:
        return None  # the host uses {"type": "object"}
    try:
        schema = json.loads(text)
    except ValueError as exc:
        return f"not JSON ({exc})"
    if not isinstance(schema, dict):
        return f"a JSON {type(schema).__name__}, not an object"
    try:
        validators.validator_for(schema).check_schema(schema)
    except schema_errors.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"not valid JSON Schema at {where}: {exc.message}"
    if "type" in schema and schema["type"] != "object":
        return f"type {schema['type']!r}: a tool's input is an object"
    return None


def _tools(kit: Kit, desc: pb.DescribeResponse) -> None:
    names = [t.name for t in desc.tools]
    problems = []
    if any(not n for n in names):
        problems.append("a tool without a name")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"tool name(s) listed more than once: {twice}")
    for tool in desc.tools:
        why = schema_problem(tool.input_schema_json)
        if why is not None:
            problems.append(f"tool {tool.name!r}: input_schema_json {why}")
    if problems:
        kit.results.failed("3.3", "; ".join(problems))
    else:
        kit.results.passed("3.3", f"tools: {', '.join(names) or 'none'}" + (" (schemas valid)" if names else ""))
