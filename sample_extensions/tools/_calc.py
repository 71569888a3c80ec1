"""A safe arithmetic evaluator: parsed with `ast`, only numbers, + - * / ** % and parentheses."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 1000  # 10**1000 is fine for Python ints; 9**9**9 would hang the process
MAX_RESULT_DIGITS = 4000


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or cannot be evaluated (names the reason)."""


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression such as `2*(3+4)` or `-2 ** 0.5 % 3`.

    Only numeric literals, the binary operators + - * / ** %, unary + and -, and parentheses are
    accepted; anything else (names, calls, attributes, strings, comparisons) raises CalculatorError.
    Integral float results are returned as ints (`4/2` -> 2).
    """
    if not isinstance(expression, str):
        raise CalculatorError(f"expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    if not expression.strip():
        raise CalculatorError("expression is empty")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from None
    result = _eval(tree.body)
    if isinstance(result, float):
        if math.isnan(result) or math.isinf(result):
            raise CalculatorError("result is not a finite number")
        if result.is_integer() and abs(result) < 2**53:
            return int(result)
    return result


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalculatorError(f"only numbers are allowed, got {node.value!r}")
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent {right} is larger than {MAX_EXPONENT}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result is too large") from None
        if isinstance(value, complex):
            raise CalculatorError("result is not a real number")
        if isinstance(value, int) and value.bit_length() > MAX_RESULT_DIGITS * 3.33:
            raise CalculatorError("result is too large")
        return value
    raise CalculatorError(f"{type(node).__name__} is not allowed: only numbers, + - * / ** % and parentheses")
