"""Unit conversion for length, mass and temperature (the tables behind `convert_units`)."""

from __future__ import annotations

from typing import Literal

Quantity = Literal["length", "mass", "temperature"]

# Factors to the base unit of each linear quantity (metre, kilogram).
LENGTH_UNITS: dict[str, float] = {
    "mm": 0.001,
    "cm": 0.01,
    "m": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "ft": 0.3048,
    "yd": 0.9144,
    "mi": 1609.344,
}
MASS_UNITS: dict[str, float] = {
    "mg": 1e-6,
    "g": 0.001,
    "kg": 1.0,
    "t": 1000.0,
    "oz": 0.028349523125,
    "lb": 0.45359237,
}
TEMPERATURE_UNITS: tuple[str, ...] = ("C", "F", "K")

UNITS: dict[str, tuple[str, ...]] = {
    "length": tuple(LENGTH_UNITS),
    "mass": tuple(MASS_UNITS),
    "temperature": TEMPERATURE_UNITS,
}


class ConversionError(ValueError):
    """Unknown quantity or unit, or a value that is not a number."""


def convert(value: float, from_unit: str, to_unit: str, quantity: str) -> float:
    """Convert `value` between two units of one quantity, rounded to 10 significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConversionError(f"value must be a number, got {value!r}")
    if quantity not in UNITS:
        raise ConversionError(f"unknown quantity {quantity!r}; known: {', '.join(UNITS)}")
    for unit in (from_unit, to_unit):
        if unit not in UNITS[quantity]:
            raise ConversionError(f"unknown {quantity} unit {unit!r}; known: {', '.join(UNITS[quantity])}")
    if quantity == "temperature":
        kelvin = _to_kelvin(value, from_unit)
        if kelvin < -1e-9:
            raise ConversionError(f"{value} {from_unit} is below absolute zero")
        result = _from_kelvin(kelvin, to_unit)
    else:
        table = LENGTH_UNITS if quantity == "length" else MASS_UNITS
        result = value * table[from_unit] / table[to_unit]
    return float(f"{result:.10g}")


def _to_kelvin(value: float, unit: str) -> float:
    if unit == "C":
        return value + 273.15
    if unit == "F":
        return (value - 32.0) * 5.0 / 9.0 + 273.15
    return value


def _from_kelvin(kelvin: float, unit: str) -> float:
    if unit == "C":
        return kelvin - 273.15
    if unit == "F":
        return (kelvin - 273.15) * 9.0 / 5.0 + 32.0
    return kelvin


def input_schema() -> dict[str, object]:
    """The JSON Schema of `convert_units`' input, with the units as enums."""
    all_units = [u for units in UNITS.values() for u in units]
    return {
        "type": "object",
        "properties": {
            "value": {"type": "number", "description": "The amount to convert"},
            "from": {"type": "string", "enum": all_units, "description": "The unit of `value`"},
            "to": {"type": "string", "enum": all_units, "description": "The unit to convert to"},
            "quantity": {
                "type": "string",
                "enum": list(UNITS),
                "description": "length (mm cm m km in ft yd mi), mass (mg g kg t oz lb), temperature (C F K)",
            },
        },
        "required": ["value", "from", "to", "quantity"],
        "additionalProperties": False,
    }
