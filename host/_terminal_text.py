"""Make untrusted text safe to print on a terminal.

Everything the CLI prints that came from an extension or a model (streamed text, tool names and outputs, trace
lines, errors, manifest fields, extension log lines) goes through `terminal_safe`. Invariant: the result holds no
character a terminal acts on except newline and tab — no C0 control (so no ESC sequence: colours, cursor moves,
window titles, OSC 8 links, clipboard writes), no DEL, no C1 control (8-bit CSI), no bidirectional override or
isolate (U+202A-U+202E, U+2066-U+2069, which reorder what a reader sees). Each such character is shown as a
visible escape (`\\x1b`, `\\u202e`), so the reader sees that something was there and what it was. A lone carriage
return is escaped too (it would let a line overwrite what was printed before it); CRLF becomes a newline.

One `str.translate` with a prebuilt table: linear, no per-character Python work.
"""

from __future__ import annotations

import logging

_UNSAFE: list[int] = [
    *(c for c in range(0x00, 0x20) if c not in (0x09, 0x0A)),  # C0 (incl. ESC, CR, BEL, BS) but tab and newline
    0x7F,  # DEL
    *range(0x80, 0xA0),  # C1 (0x9B is an 8-bit CSI)
    *range(0x202A, 0x202F),  # LRE RLE PDF LRO RLO
    *range(0x2066, 0x206A),  # LRI RLI FSI PDI
]
_TABLE: dict[int, str] = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}


def terminal_safe(text: object) -> str:
    """`text` (made a str) with every terminal control character but newline and tab as a visible escape."""
    return str(text).replace("\r\n", "\n").translate(_TABLE)


class TerminalSafeFormatter(logging.Formatter):
    """A log formatter whose output is `terminal_safe` (log lines carry extension stderr and error texts)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))
