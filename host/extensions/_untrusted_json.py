"""JSON text from an extension's tool output, decoded into values the host can store and send anywhere.

Tool outputs are untrusted like hook values (issue 19 item 3). What strict JSON readers would refuse is converted,
deliberately, and counted so the caller can log it with the extension's name:
- non-finite numbers (`NaN`, `Infinity`, `-Infinity`, which Python's json accepts) become `null`;
- lone UTF-16 surrogates (`"\\udcff"`, valid JSON escapes that no UTF-8 text can hold) become U+FFFD.
A valid surrogate pair (`"\\ud83d\\ude00"`) is one character and is kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


@dataclass(slots=True)
class Converted:
    """What decoding changed: non-finite numbers made null, strings with lone surrogates repaired."""

    non_finite: int = 0
    surrogates: int = 0

    def __bool__(self) -> bool:
        return bool(self.non_finite or self.surrogates)

    def describe(self) -> str:
        parts = []
        if self.non_finite:
            parts.append(f"{self.non_finite} non-finite number(s) (NaN/Infinity) replaced by null")
        if self.surrogates:
            parts.append(f"{self.surrogates} string(s) with lone surrogates repaired (U+FFFD)")
        return "; ".join(parts)


def _repair(value: Any, seen: Converted) -> Any:
    if isinstance(value, str):
        if _LONE_SURROGATE.search(value):
            seen.surrogates += 1
            return _LONE_SURROGATE.sub(REPLACEMENT, value)
        return value
    if isinstance(value, list):
        return [_repair(v, seen) for v in value]
    if isinstance(value, dict):
        return {_repair(k, seen): _repair(v, seen) for k, v in value.items()}
    return value


def loads_untrusted(text: str, seen: Converted | None = None) -> tuple[Any, Converted]:
    """Decode `text` (raises ValueError when it is not JSON); (value, what was converted)."""
    seen = seen if seen is not None else Converted()

    def constant(_name: str) -> None:
        seen.non_finite += 1
        return None

    value = json.loads(text, parse_constant=constant)
    if _SURROGATE_ESCAPE.search(text):  # surrogates can only come from \u escapes: a valid UTF-8 string holds none
        value = _repair(value, seen)
    return value, seen
