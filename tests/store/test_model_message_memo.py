"""A turn converts only the messages that changed since the last turn (host/turn/_ui_messages.py ModelMessageMemo):
the same result as converting the whole transcript, never the memo's own dicts, and nothing kept that is gone."""

from __future__ import annotations

from typing import Any

from host.turn._ui_messages import ModelMessageMemo, to_model_messages


def _transcript() -> list[dict[str, Any]]:
    return [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "add 2 and 3"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-add", "toolCallId": "c1", "toolName": "add", "state": "output-available",
             "input": {"a": 2, "b": 3}, "output": 5},
            {"type": "step-start"},
            {"type": "text", "text": "5"},
        ]},
    ]


def test_the_memo_converts_like_the_whole_transcript_turn_after_turn() -> None:
    memo = ModelMessageMemo()
    transcript = _transcript()
    assert memo.convert(transcript) == to_model_messages(transcript)
    transcript = [*transcript, {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "and 4?"}]}]
    assert memo.convert(transcript) == to_model_messages(transcript)


def test_a_turn_that_changes_its_messages_does_not_change_the_next_turns() -> None:
    memo = ModelMessageMemo()
    transcript = _transcript()
    first = memo.convert(transcript)
    first[0]["content"] = "changed by a hook"
    first[1]["tool_calls"][0]["function"]["arguments"] = "{}"
    first[1]["tool_calls"].append({"id": "x"})
    assert memo.convert(transcript) == to_model_messages(transcript)


def test_a_message_no_longer_in_the_transcript_is_forgotten() -> None:
    memo = ModelMessageMemo()
    transcript = _transcript()
    memo.convert(transcript)
    assert memo.convert(transcript[:1]) == to_model_messages(transcript[:1])
    assert len(memo._ui) == 1 and memo._ui[0] is transcript[0]
    assert memo._flat == to_model_messages(transcript[:1]) and memo._nested == []


def test_an_unchanged_message_is_not_converted_again() -> None:
    memo = ModelMessageMemo()
    transcript = _transcript()
    memo.convert(transcript)
    transcript[1]["parts"][3]["text"] = "edited in place"  # not allowed for read-only transcripts: shows the reuse
    assert memo.convert(transcript)[-1]["content"] == "5"


def _tool_turn(i: int) -> list[dict[str, Any]]:
    return [
        {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": f"add {i} and 1"}]},
        {"id": f"a{i}", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-add", "toolCallId": f"c{i}", "toolName": "add", "state": "output-available",
             "input": {"a": i, "b": 1}, "output": i + 1},
            {"type": "step-start"},
            {"type": "text", "text": str(i + 1)},
        ]},
    ]


def test_replaced_removed_and_reordered_messages_convert_like_the_whole_transcript() -> None:
    memo = ModelMessageMemo()
    transcript = [m for i in range(6) for m in _tool_turn(i)]
    steps = [
        lambda t: t,
        lambda t: [*t[:5], {**t[5], "parts": [{"type": "text", "text": "replaced"}]}, *t[6:]],  # a new object mid-way
        lambda t: t[:3] + t[7:],  # messages removed from the middle
        lambda t: [*t, *_tool_turn(9)],
        lambda t: list(reversed(t)),
        lambda t: [],
        lambda t: _tool_turn(3),
    ]
    for step in steps:
        transcript = step(transcript)
        got = memo.convert(transcript)
        assert got == to_model_messages(transcript)
        for d in got:  # every tool call is the turn's own, never the memo's
            d.get("tool_calls", [{}])[0].setdefault("function", {})["arguments"] = "changed"
        assert memo.convert(transcript) == to_model_messages(transcript)
