"""Which observers are detached from which turn, and which observations of a turn were lost (issue 10 item 19).

A turn is known by its context record (host/extensions/_frames.py `context_field`: the serialized CallContext that
heads its observation frames). Invariants:
- An observer that stalls (its observations not acknowledged within timeouts.hookMs, see
  host/extensions/_extension_client.py) is detached from every turn with observations in flight to it: later
  observations of those turns are not sent to it (counted) and their end-of-turn flush does not wait for it.
  A turn that ends forgets its detachments, so the next turn tries the observer again.
- Observations a broken connection never handled are counted per turn and reported once, by that turn's flush.
- Everything is bounded: at most MAX_TURNS turns are remembered per extension (the oldest are forgotten).
"""

from __future__ import annotations

from ._snapshots import CallContext

MAX_TURNS = 1024


def _put(book: dict[bytes, int], record: bytes, n: int) -> None:
    book[record] = book.get(record, 0) + n
    if len(book) > MAX_TURNS:
        del book[next(iter(book))]


class ObserverLedger:
    """Per manager: detachments and lost observations, by extension name and turn."""

    __slots__ = ("any_detached", "_detached", "_lost", "_contexts")

    def __init__(self) -> None:
        self.any_detached = False  # the per-observation path checks only this while nothing is detached
        self._detached: dict[str, dict[bytes, int]] = {}  # ext -> {turn: later observations not sent}
        self._lost: dict[str, dict[bytes, int]] = {}  # ext -> {turn: observations lost with a connection}
        self._contexts: dict[bytes, CallContext | None] = {}  # turn record -> its CallContext (for the trace)

    def note_context(self, record: bytes, context: CallContext | None) -> None:
        """A turn's context record was made (once per change of context, not per observation)."""
        self._contexts[record] = context
        if len(self._contexts) > MAX_TURNS:
            del self._contexts[next(iter(self._contexts))]

    def active(self, record: bytes) -> bool:
        """Whether the turn `record` sent observations and has not ended (flushed) yet."""
        return record in self._contexts

    def context(self, record: bytes) -> CallContext | None:
        return self._contexts.get(record)

    def detach(self, ext: str, record: bytes) -> bool:
        """Detach `ext` from the turn `record`; False if it already was."""
        book = self._detached.setdefault(ext, {})
        if record in book:
            return False
        _put(book, record, 0)
        self.any_detached = True
        return True

    def skip(self, ext: str, record: bytes) -> bool:
        """True (and counted) when an observation of turn `record` must not be sent to `ext`."""
        book = self._detached.get(ext)
        if book is None or record not in book:
            return False
        book[record] += 1
        return True

    def add_lost(self, ext: str, lost: dict[bytes, int]) -> None:
        book = self._lost.setdefault(ext, {})
        for record, n in lost.items():
            _put(book, record, n)

    def end_turn(self, ext: str, record: bytes) -> tuple[int | None, int]:
        """Forget turn `record` for `ext`: (later observations not sent, or None if it was not detached; lost)."""
        detached = self._detached.get(ext)
        skipped = detached.pop(record, None) if detached else None
        if detached is not None and not detached:
            del self._detached[ext]
            self.any_detached = bool(self._detached)
        lost_book = self._lost.get(ext)
        lost = lost_book.pop(record, 0) if lost_book else 0
        return skipped, lost

    def forget(self, record: bytes) -> None:
        self._contexts.pop(record, None)
