"""terminal_safe: what the CLI prints of untrusted text keeps no character a terminal acts on."""

from __future__ import annotations

from host import terminal_safe


def test_escapes_c1_and_bidi_overrides_become_visible_text() -> None:
    """ESC sequences, BEL, C1 CSI, lone CR and bidi overrides are shown escaped; text, tab, newline, CRLF stay."""
    raw = "a\x1b[31mred\x1b]0;t\x07 \x9b2J x\ry \u202eevil\u2066 é\t日本\r\nnext"
    assert terminal_safe(raw) == r"a\x1b[31mred\x1b]0;t\x07 \x9b2J x\x0dy \u202eevil\u2066 é" + "\t日本\nnext"
