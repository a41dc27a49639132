"""A safe arithmetic evaluator: walks the `ast` of an expression, never executes code."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

Number = int | float

MAX_LENGTH = 500
MAX_EXPONENT = 1000
MAX_DIGITS = 1000
_INT_LIMIT = 10**MAX_DIGITS

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _min(*args: Number) -> Number:
    return min(args)


def _max(*args: Number) -> Number:
    return max(args)


def _round(x: Number, ndigits: int | None = None) -> Number:
    if ndigits is not None and (not isinstance(ndigits, int) or abs(ndigits) > MAX_DIGITS):
        raise ValueError(f"digits must be an integer of at most {MAX_DIGITS} in size")
    return round(x) if ndigits is None else round(x, ndigits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": _round,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "min": _min,
    "max": _max,
}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: lambda base, exp: _power(base, exp),
}

_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression such as ``"2 * (3 + sqrt(16)) ** 2"``.

    Supports int/float literals, ``+ - * / // % **``, unary ``+``/``-``, parentheses,
    the constants ``pi``, ``e``, ``tau`` and the functions ``sqrt abs round floor ceil
    log log10 exp sin cos tan min max`` (positional arguments only). Anything else,
    and any result that is too large, non-finite, a division by zero or outside a
    function's domain, raises ValueError with a message saying why.
    """
    if not isinstance(expression, str):
        raise ValueError("expression must be a string")
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"expression is too long ({len(expression)} > {MAX_LENGTH} characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"invalid expression: {exc.msg}") from None
    except (MemoryError, RecursionError):
        raise ValueError("expression is too deeply nested") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("result is too large") from None
    except RecursionError:
        raise ValueError("expression is too deeply nested") from None


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            raise _unsupported(f"literal {node.value!r}")
        return _checked(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name):
        if node.id not in _CONSTANTS:
            raise _unsupported(f"name {node.id!r} (known names: {', '.join(_CONSTANTS)})")
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call):
        return _call(node)
    raise _unsupported(_describe(node))


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        what = repr(node.func.id) if isinstance(node.func, ast.Name) else _describe(node.func)
        raise _unsupported(f"call to {what} (known functions: {', '.join(_FUNCTIONS)})")
    name = node.func.id
    if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
        raise _unsupported(f"{name}() takes positional arguments only")
    args = [_eval(arg) for arg in node.args]
    try:
        result = _FUNCTIONS[name](*args)
    except TypeError as exc:
        raise ValueError(f"bad arguments to {name}(): {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{name}() failed: {exc}") from None
    return _checked(result)


def _power(base: Number, exp: Number) -> Number:
    if abs(exp) > MAX_EXPONENT:
        raise ValueError(f"exponent is too large (more than {MAX_EXPONENT} in absolute value)")
    if exp > 0 and abs(base) > 1 and exp * math.log10(abs(base)) > MAX_DIGITS:
        raise ValueError(f"power is too large (more than {MAX_DIGITS} digits)")
    result: Any = base**exp
    if isinstance(result, complex):
        raise ValueError("power has no real result")
    return _checked(result)


def _checked(value: Any) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"unsupported result type {type(value).__name__}")
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        raise ValueError(f"integer result has more than {MAX_DIGITS} digits")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("result is not a finite number")
    return value


def _unsupported(what: str) -> ValueError:
    return ValueError(f"unsupported expression: {what}")


def _describe(node: ast.AST) -> str:
    kind = {
        ast.Attribute: "attribute access",
        ast.Subscript: "subscript",
        ast.Compare: "comparison",
        ast.BoolOp: "boolean operator",
        ast.Lambda: "lambda",
    }.get(type(node), type(node).__name__)
    try:
        source = ast.unparse(node)
    except Exception:  # unparse never matters for safety; fall back to the kind alone
        return kind
    return f"{kind} {source[:60]!r}"
