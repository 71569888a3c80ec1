"""router — sets maxSteps, temperature and system additions per turn from the request body (beforeTurn)."""

from __future__ import annotations

from typing import Any

from extension_sdk import Extension

from ._routing import CONTINUATION_MAX_STEPS, DEFAULT_MAX_STEPS, MODE_TEMPERATURE, RoutingError, route

__all__ = ["CONTINUATION_MAX_STEPS", "DEFAULT_MAX_STEPS", "MODE_TEMPERATURE", "RoutingError", "ext", "route"]

ext = Extension("router", "1.0.0", description="Model-settings router: steps, temperature and persona per turn")


@ext.hook("beforeTurn")
def route_turn(snapshot: dict[str, Any]) -> dict[str, Any]:
    return route(snapshot)
