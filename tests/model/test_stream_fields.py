"""stream_field (host/turn/_stream_fields.py) reads what getattr(obj, name, None) reads from litellm's stream objects."""

from __future__ import annotations

from typing import Any

import pytest
from litellm.types.utils import ChatCompletionDeltaToolCall, Delta, Function, ModelResponseStream, StreamingChoices
from pydantic import BaseModel

from host.turn._stream_fields import stream_field


def _chunks() -> list[ModelResponseStream]:
    call = ChatCompletionDeltaToolCall(id="call_1", index=0, type="function",
                                       function=Function(name="lookup", arguments='{"key": "a"}'))
    return [
        ModelResponseStream(id="r1", choices=[StreamingChoices(index=0, delta=Delta(content="hel"))]),
        ModelResponseStream(id="r1", choices=[StreamingChoices(index=0, delta=Delta(reasoning_content="think"))]),
        ModelResponseStream(id="r1", choices=[StreamingChoices(index=0, delta=Delta(tool_calls=[call]))]),
        ModelResponseStream(id="r1", choices=[StreamingChoices(index=0, delta=Delta(), finish_reason="stop")],
                            usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    ]


@pytest.mark.parametrize("name", ["usage", "id", "choices", "reasoning_content", "content", "tool_calls"])
def test_stream_field_reads_what_getattr_reads_from_litellms_chunks_and_deltas(name: str) -> None:
    for chunk in _chunks():
        assert stream_field(chunk, name) == getattr(chunk, name, None)
        delta = chunk.choices[0].delta
        assert stream_field(delta, name) == getattr(delta, name, None)


def test_stream_field_reads_the_values_a_turn_needs() -> None:
    chunks = _chunks()
    assert [stream_field(c.choices[0].delta, "content") for c in chunks[:1]] == ["hel"]
    assert stream_field(chunks[1].choices[0].delta, "reasoning_content") == "think"
    [call] = stream_field(chunks[2].choices[0].delta, "tool_calls")
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "lookup", '{"key": "a"}')
    assert stream_field(chunks[0], "usage") is None
    assert stream_field(chunks[3], "usage").total_tokens == 5


def test_a_name_the_class_defines_is_read_through_the_class() -> None:
    class WithProperty(BaseModel):
        model_config = {"extra": "allow"}
        raw: int = 2

        @property
        def doubled(self) -> int:
            return self.raw * 2

    model: Any = WithProperty(doubled_extra=5)
    assert stream_field(model, "doubled") == 4
    assert stream_field(model, "doubled_extra") == 5
    assert stream_field(model, "missing") is None
    assert stream_field({"content": "x"}, "content") is None  # not a model: getattr(obj, name, None)
