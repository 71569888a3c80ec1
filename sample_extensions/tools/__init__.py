"""tools — a tool provider: `calculator` (safe arithmetic), `convert_units` (length, mass, temperature)
and `count_to`, a streaming tool (preliminary progress results, then the total)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from extension_sdk import Extension

from ._calc import CalculatorError, evaluate
from ._units import UNITS, ConversionError, convert, input_schema

__all__ = ["UNITS", "CalculatorError", "ConversionError", "convert", "evaluate", "ext"]

ext = Extension("tools", "1.0.0", description="Calculator, unit converter and a streaming counter")

COUNT_TO_MAX = 100


@ext.tool(
    description="Evaluates an arithmetic expression: numbers, + - * / ** % and parentheses, e.g. 2*(3+4)",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (1 + 2) * 3 ** 2 % 5"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
)
def calculator(args: dict[str, Any]) -> int | float:
    return evaluate(args.get("expression"))


@ext.tool(description="Converts a value between units of length, mass or temperature", parameters=input_schema())
def convert_units(args: dict[str, Any]) -> dict[str, Any]:
    try:
        value, from_unit, to_unit, quantity = args["value"], args["from"], args["to"], args["quantity"]
    except KeyError as missing:
        raise ConversionError(f"missing field {missing}") from None
    result = convert(value, from_unit, to_unit, quantity)
    return {"value": result, "unit": to_unit, "text": f"{value:g} {from_unit} = {result:g} {to_unit}"}


@ext.tool(
    description="Counts from 1 to n, streaming progress as preliminary results; the final result is n",
    parameters={
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": COUNT_TO_MAX},
            "delayMs": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 0},
        },
        "required": ["n"],
        "additionalProperties": False,
    },
)
async def count_to(args: dict[str, Any]) -> AsyncIterator[Any]:
    n, delay_ms = args.get("n"), args.get("delayMs", 0)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= COUNT_TO_MAX:
        raise ValueError(f"count_to: n must be an integer from 1 to {COUNT_TO_MAX}, got {n!r}")
    for i in range(1, n + 1):
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        yield {"progress": i, "of": n}
    yield n
