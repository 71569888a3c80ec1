"""What the kit sends and how it reads the answers raw: sample snapshots, sample tool inputs from a JSON Schema,
and a Connect stream whose frames are decoded by the kit (an undecodable frame is reported, not hidden)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from extension_sdk.proto import extension_pb2 as pb

from ..extensions._extension_client import salvage_frame_header

SESSION_ID = "hookwire-kit-session"
REQUEST_ID = "hookwire-kit-request"
OBSERVATION_HOOKS = ("beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")


def call_context() -> pb.CallContext:
    return pb.CallContext(session_id=SESSION_ID, request_id=REQUEST_ID)


def turn_snapshot(tool_names: list[str]) -> pb.TurnSnapshot:
    return pb.TurnSnapshot(system="You are a helpful assistant.", tool_names=tool_names, message_count=1,
                           continuation=False, model_id="hookwire/scripted")


def tool_call_snapshot() -> pb.ToolCallSnapshot:
    return pb.ToolCallSnapshot(tool_name="kit_lookup", tool_call_id="kit-call-1", input_json='{"query": "weather"}',
                               step_number=0)


def observation_items(hooks: list[str], decisions: bool) -> list[pb.Observation]:
    """One observation of each kind the extension subscribes to (observe-only beforeToolCall without decisions)."""
    items: list[pb.Observation] = []
    if "beforeToolCall" in hooks and not decisions:
        items.append(pb.Observation(before_tool_call=tool_call_snapshot()))
    if "onChunk" in hooks:
        items.append(pb.Observation(chunk=pb.ChunkSnapshot(type="text-delta", text="Hello")))
    if "afterToolCall" in hooks:
        items.append(pb.Observation(after_tool_call=pb.ToolResultSnapshot(
            tool_name="kit_lookup", tool_call_id="kit-call-1", input_json='{"query": "weather"}', step_number=0,
            duration_ms=12.5, success=True, output_json='"sunny"')))
    if "onStepFinish" in hooks:
        items.append(pb.Observation(step_finish=pb.StepSnapshot(
            step_number=0, finish_reason="stop", text="Hello", tool_call_count=1, tool_result_count=1,
            usage=pb.Usage(input_tokens=10, output_tokens=2, total_tokens=12))))
    return items


def sample_instance(schema: Any, depth: int = 0) -> Any:
    """A small value the schema plausibly accepts (required properties only): the kit's default tool input."""
    if not isinstance(schema, dict) or depth > 8:
        return {}
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return sample_instance(schema[key][0], depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        return {k: sample_instance(props.get(k, {}), depth + 1) for k in required if isinstance(k, str)}
    if kind == "array":
        n = schema.get("minItems", 0) if isinstance(schema.get("minItems"), int) else 0
        return [sample_instance(schema.get("items", {}), depth + 1) for _ in range(min(n, 4))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = low if isinstance(low, (int, float)) and not isinstance(low, bool) else 1
        if "exclusiveMinimum" in schema and value == schema.get("exclusiveMinimum"):
            value += 1
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "string":
        n = schema.get("minLength", 0) if isinstance(schema.get("minLength"), int) else 0
        return "test" + "x" * max(0, n - 4)
    return {}


@dataclass
class Received:
    """One frame from the extension: when it came, its id and body kind (None: undecodable), and the frame."""

    at: float
    id: int
    kind: str | None
    frame: pb.ExtensionFrame | None
    error: str = ""


@dataclass
class ConnectSession:
    """A Connect stream the kit writes frames on and reads raw frames from (in a reader task)."""

    call: Any
    received: list[Received] = field(default_factory=list)
    ended: str | None = None  # why the stream ended ("" for a clean end)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task[None] | None = None
    sent_at: dict[int, float] = field(default_factory=dict)

    @classmethod
    def open(cls, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]) -> ConnectSession:
        rpc = channel.stream_stream("/hookwire.v1.Extension/Connect",
                                    request_serializer=pb.HostFrame.SerializeToString,
                                    response_deserializer=lambda b: b)
        session = cls(call=rpc(metadata=metadata))
        session._reader = asyncio.ensure_future(session._read())
        return session

    async def _read(self) -> None:
        try:
            while True:
                raw = await self.call.read()
                if raw is grpc.aio.EOF:
                    self.ended = ""
                    break
                now = time.monotonic()
                try:
                    frame = pb.ExtensionFrame.FromString(raw)
                except DecodeError as exc:  # its id, if the top level can be read, says what it answered
                    fid, _body = salvage_frame_header(raw)
                    self.received.append(Received(now, fid, None, None, f"frame {fid}: not a valid ExtensionFrame "
                                                                        f"({exc})"))
                else:
                    self.received.append(Received(now, frame.id, frame.WhichOneof("body"), frame))
                self._changed.set()
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as exc:
            self.ended = f"{exc.code().name}: {exc.details()}"
        except Exception as exc:  # noqa: BLE001 - reported as the stream's end
            self.ended = f"{type(exc).__name__}: {exc}"
        finally:
            self._changed.set()

    async def send(self, frame: pb.HostFrame) -> None:
        """Write a frame; a stream that already ended is recorded in `ended`, never raised."""
        self.sent_at[frame.id] = time.monotonic()
        if self.ended is not None:
            return
        try:
            await self.call.write(frame)
        except Exception as exc:  # noqa: BLE001 - the stream ended (the reader records how, when it can)
            await asyncio.sleep(0.05)
            if self.ended is None:
                self.ended = f"writing a frame failed: {type(exc).__name__}: {exc}"

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `predicate()` holds (checked after each frame) or the stream ends or time runs out."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while not predicate():
            if self.ended is not None:
                return predicate()
            left = end - loop.time()
            if left <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return predicate()
        return True

    def frames_for(self, fid: int) -> list[Received]:
        return [r for r in self.received if r.id == fid]

    def answered(self, fid: int) -> bool:
        return any(r.id == fid for r in self.received)

    def tool_done(self, fid: int) -> bool:
        return any(r.id == fid and r.frame is not None and r.kind == "tool_event"
                   and r.frame.tool_event.WhichOneof("event") in ("output_json", "error") for r in self.received)

    async def close(self) -> None:
        self.call.cancel()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)


def decode_json(text: str) -> str | None:
    """None when `text` is JSON; else why not."""
    try:
        json.loads(text)
    except ValueError as exc:
        return str(exc)
    return None
