"""The journal's per-entry work done once where it can be (host/turn/_journal_memo.py, the writer's drafts):
the entries are exactly what computing each alone gives."""

from __future__ import annotations

from extension_sdk.proto import extension_pb2 as pb
from host.extensions._journal_tap import HookRecord
from host.extensions._snapshots import CallContext
from host.turn._journal import JournalDraft
from host.turn._journal_memo import AnswerOutcomes, SnapshotDigests, digest
from host.turn._journal_writer import SessionJournal, outcome_of


def snap(key: str, call: str = "call_1") -> pb.ToolCallSnapshot:
    return pb.ToolCallSnapshot(tool_name="lookup", tool_call_id=call, input_json=f'{{"key": "{key}"}}', step_number=1)


def test_a_snapshot_seen_again_gets_the_digest_of_its_content_not_of_the_object() -> None:
    digests = SnapshotDigests()
    first, other = snap("alpha"), snap("beta")
    assert digests.of(first) == digest(first)
    assert digests.of(other) == digest(other)
    assert digests.of(snap("alpha")) == digest(first)  # an equal snapshot in a frame of its own
    first.input_json = '{"key": "changed"}'  # the same object, new content
    assert digests.of(first) == digest(first) != digest(other)
    assert digests.of(pb.TurnSnapshot(system="s")) == digest(pb.TurnSnapshot(system="s"))


class Reply:
    def __init__(self, frame: pb.ExtensionFrame) -> None:
        self.frame, self.ms = frame, 1.0


class Failure:
    frame = None
    outcome, detail, ms = "timeout", "no answer within 50 ms", 50.0


def decision(action: int, **fields: str) -> Reply:
    return Reply(pb.ExtensionFrame(id=7, before_tool_call=pb.BeforeToolCallResponse(
        decision=pb.ToolCallDecision(action=action, **fields))))


def test_an_answer_seen_again_gets_the_outcome_of_its_content() -> None:
    outcomes = AnswerOutcomes(outcome_of)
    answers = [
        ("beforeToolCall", decision(pb.ToolCallDecision.BLOCK, reason="no")),
        ("beforeToolCall", decision(pb.ToolCallDecision.ALLOW, input_json='{"a": 1}')),
        ("beforeToolCall", decision(pb.ToolCallDecision.SUBSTITUTE, output_json='"cached"')),
        ("beforeToolCall", Reply(pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse()))),
        ("beforeTurn", Reply(pb.ExtensionFrame(before_turn=pb.BeforeTurnResponse(
            config=pb.TurnConfigPatch(max_steps=2))))),
        ("beforeTurn", Reply(pb.ExtensionFrame(before_turn=pb.BeforeTurnResponse()))),
        ("beforeToolCall", Failure()),
    ]
    expected = [outcome_of(hook, answer) for hook, answer in answers]
    assert len({repr(e) for e in expected}) == len(expected)  # all different
    for _ in range(2):  # first computed, then found
        assert [outcomes.of(hook, answer) for hook, answer in answers] == expected
    again = decision(pb.ToolCallDecision.BLOCK, reason="no")
    again.frame.id = 99  # another call's frame, the same answer
    assert outcomes.of("beforeToolCall", again) == expected[0]


def test_a_writers_draft_has_every_journal_draft_field_and_validates() -> None:
    class Answer:
        frame = pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse(
            decision=pb.ToolCallDecision(action=pb.ToolCallDecision.BLOCK, reason="no")))
        ms = 0.7

    record = HookRecord("guard", "1.0.0", "beforeToolCall", "enforce", "validate",
                        CallContext(session_id="s1", request_id="req_1"), snap("alpha", "call_7"), Answer())
    fields, kept = SessionJournal(None, "s1")._draft(record, 12.5)
    assert set(fields) == set(JournalDraft.model_fields)
    draft = JournalDraft(**fields)
    assert (draft.call_id, draft.outcome, draft.decision, draft.reason) == ("call_7", "block", {"action": "block"}, "no")
    assert (draft.snapshot_sha256, kept) == (digest(record.snapshot).sha256, digest(record.snapshot).kept)
