"""The router's rules: turn snapshot (+ body) in, TurnConfig patch (camelCase) out."""

from __future__ import annotations

from typing import Any

MODE_TEMPERATURE: dict[str, float] = {"precise": 0.0, "balanced": 0.5, "creative": 0.9}
DEFAULT_MAX_STEPS = 8
CONTINUATION_MAX_STEPS = 3
MAX_PERSONA_CHARS = 500


class RoutingError(ValueError):
    """The turn body asks for something the router does not know (names the field and the allowed values)."""


def route(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The TurnConfig patch for one turn.

    - maxSteps: DEFAULT_MAX_STEPS, or CONTINUATION_MAX_STEPS on continuation turns (auto-continue after
      tool results need fewer steps);
    - temperature: from body `mode` (precise 0, balanced 0.5, creative 0.9);
    - system: body `persona` appended to the assembled system prompt.
    """
    body = snapshot.get("body")
    body = body if isinstance(body, dict) else {}
    patch: dict[str, Any] = {
        "maxSteps": CONTINUATION_MAX_STEPS if snapshot.get("continuation") else DEFAULT_MAX_STEPS,
    }
    mode = body.get("mode")
    if mode is not None:
        if mode not in MODE_TEMPERATURE:
            raise RoutingError(f"body.mode {mode!r} is not one of {', '.join(MODE_TEMPERATURE)}")
        patch["temperature"] = MODE_TEMPERATURE[mode]
    persona = body.get("persona")
    if persona is not None:
        if not isinstance(persona, str) or not persona.strip():
            raise RoutingError("body.persona must be a non-empty string")
        addition = f"Persona for this turn: {persona.strip()[:MAX_PERSONA_CHARS]}"
        system = str(snapshot.get("system") or "")
        patch["system"] = f"{system}\n\n{addition}" if system else addition
    return patch
