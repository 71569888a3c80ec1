"""Whether an extension says it handled the observations it was sent (`ObservationAck.handled`).

The contract (docs/protocol.md [4.4]): an ack's `handled` counts every observation the extension handled since the
previous ack it sent — the items of id-0 frames and of preludes included, and its own frame's. A unary `Observe`
ack counts its batch. The host compares that with what it wrote: a shortfall (or an `Observe` call that failed,
e.g. UNIMPLEMENTED) is counted here, and the turn's flush reports it as `failed_open` instead of "delivered".
An extension that answers id-0 frames too (older ones did) may count per frame: those counts are added in.
"""

from __future__ import annotations

import logging

log = logging.getLogger("hookwire.extensions")


class AckAccount:
    """Observations written to one connection vs. observations the extension acknowledged as handled."""

    __slots__ = ("name", "written", "_acked_mark", "_marks", "_unasked", "unhandled", "why")

    def __init__(self, name: str) -> None:
        self.name = name
        self.written = 0  # observation items written on the stream (frames and preludes)
        self._acked_mark = 0  # `written` as of the last ack processed
        self._marks: dict[int, int] = {}  # ack-requesting frame id -> `written` when it was sent
        self._unasked = 0  # handled counts of answers to id-0 frames since the last ack
        self.unhandled = 0  # observations the extension did not handle, in all
        self.why = ""  # the latest reason

    def wrote(self, items: int) -> None:
        self.written += items

    def asked(self, frame_id: int) -> None:
        """The frame just written (its items counted) asks for an ack."""
        self._marks[frame_id] = self.written

    def answered_unasked(self, handled: int) -> None:
        self._unasked += handled

    def acked(self, frame_id: int, handled: int) -> None:
        mark = self._marks.pop(frame_id, None)
        if mark is None:
            return
        expected, self._acked_mark = mark - self._acked_mark, mark
        got, self._unasked = handled + self._unasked, 0
        if got < expected:
            self.short(expected - got, f"acknowledged {got} of {expected} observation(s) (ObservationAck.handled)")

    def unary(self, sent: int, handled: int) -> None:
        if handled < sent:
            self.short(sent - handled, f"Observe acknowledged {handled} of {sent} observation(s) "
                                       "(ObservationAck.handled)")

    def short(self, count: int, why: str, *, logged: bool = False) -> None:
        """`count` observations were not handled (`logged`: the caller already logged why)."""
        self.unhandled += count
        self.why = why
        if not logged:
            log.warning("extension %r: %d observation(s) not handled: %s", self.name, count, why)


def unhandled_since(marks: dict[str, tuple[object, int]], name: str, acks: AckAccount) -> tuple[int, str]:
    """(observations not handled since the last call for this extension, why); `marks` keeps the count per
    extension and connection (a restarted extension starts a fresh account)."""
    last_acks, last = marks.get(name, (None, 0))
    base = last if last_acks is acks else 0
    marks[name] = (acks, acks.unhandled)
    return acks.unhandled - base, acks.why
