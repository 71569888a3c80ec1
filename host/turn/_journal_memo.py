"""What a journal entry takes from its snapshot and from its answer, computed once per distinct one (issue 19: the
journal's turn cost).

Every decider of one tool call, and usually every beforeTurn subscriber of one turn, is sent a snapshot with the same
content (each in a frame of its own), and deciders often answer alike (allow). An entry needs the snapshot's protobuf
JSON mapping (for the call id), its canonical JSON (kept for replay) and that text's sha256, and the answer
normalized (outcome, decision, reason: `outcome_of`). `SnapshotDigests.of` and `AnswerOutcomes.of` compute them for
the first and, for the others, find them by the message's deterministic wire bytes (one C-level serialization, ~1 µs)
— equal bytes of one message type are an equal message, so the entries are exactly what computing each again gives.

Kept per session journal: the last MAX_KEPT distinct snapshots whose canonical text is at most MAX_KEPT_CHARS, and the
last MAX_KEPT distinct answers of at most MAX_KEPT_CHARS wire bytes (larger ones are computed each time, never kept).
The values are shared between entries: read-only (they are only serialized).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.json_format import MessageToDict

from ._journal import snapshot_text

MAX_KEPT = 8
MAX_KEPT_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class SnapshotDigest:
    fields: dict[str, Any]  # protobuf's JSON mapping (camelCase, defaults left out): read-only
    sha256: str  # of the canonical text
    kept: str | None  # the canonical text kept for replay (None: over MAX_SNAPSHOT_CHARS)


def snapshot_dict(snapshot: Any) -> dict[str, Any]:
    """A snapshot message as the journal keeps it: protobuf's JSON mapping (camelCase), defaults left out."""
    return MessageToDict(snapshot)


def digest(snapshot: Any) -> SnapshotDigest:
    fields = snapshot_dict(snapshot)
    sha, kept = snapshot_text(fields)
    return SnapshotDigest(fields, sha, kept)


class SnapshotDigests:
    """One session journal's recent snapshot digests, by content."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, bytes], SnapshotDigest] = OrderedDict()

    def of(self, snapshot: Any) -> SnapshotDigest:
        key = (snapshot.DESCRIPTOR.full_name, snapshot.SerializeToString(deterministic=True))
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        made = digest(snapshot)
        if made.kept is not None and len(made.kept) <= MAX_KEPT_CHARS:
            self._kept[key] = made
            if len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
        return made


Outcome = tuple[str, dict[str, Any], str]  # (outcome, decision, reason): host/turn/_journal_writer.py outcome_of


class AnswerOutcomes:
    """One session journal's recent answer outcomes, by the hook and the reply's content."""

    def __init__(self, compute: Callable[[str, Any], Outcome]) -> None:
        self._compute = compute
        self._kept: OrderedDict[tuple[str, str, bytes], Outcome] = OrderedDict()

    def of(self, hook: str, answer: Any) -> Outcome:
        frame = getattr(answer, "frame", None)
        body = frame.WhichOneof("body") if frame is not None else None
        if body is None:  # a failure (timeout, error) or an empty reply: nothing to key by, and cheap
            return self._compute(hook, answer)
        wire = getattr(frame, body).SerializeToString(deterministic=True)
        key = (hook, body, wire)
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        made = self._compute(hook, answer)
        if len(wire) <= MAX_KEPT_CHARS:
            self._kept[key] = made
            if len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
        return made
