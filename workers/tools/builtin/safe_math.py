"""Safe arithmetic for the ``calculate(expression)`` tool.

The expression is lightly normalised ("12 times 13", "2^10", "20 percent of 50"),
parsed with ``ast.parse(..., mode="eval")`` (which only builds a tree, it runs
nothing) and evaluated by walking a strict whitelist of node types.  Every
size limit is checked before the expensive operation, so hostile input such as
``9**9**9**9`` is refused in microseconds instead of hanging a worker.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable

Number = int | float

MAX_LENGTH = 256
MAX_DEPTH = 32
MAX_NODES = 200
MAX_EXPONENT = 10_000
MAX_RESULT_DIGITS = 4300
MAX_INT_BITS = 4096
MAX_FACTORIAL = 1000
MAX_ROUND_DIGITS = 1000


class CalculationError(ValueError):
    """Raised with a short message a language model (or a person) can act on."""


def _round(x: Number, ndigits: Number | None = None) -> Number:
    """Python's ``round`` with a bounded, whole-number ``ndigits``."""
    if ndigits is None:
        return round(x)
    n = _whole(ndigits, "round() ndigits")
    if abs(n) > MAX_ROUND_DIGITS:
        raise CalculationError(
            f"round() ndigits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}"
        )
    return round(x, n)


def _factorial(x: Number) -> int:
    """``math.factorial`` for whole numbers 0..MAX_FACTORIAL (integral floats allowed)."""
    n = _whole(x, "factorial() argument")
    if not 0 <= n <= MAX_FACTORIAL:
        raise CalculationError(
            f"factorial() argument must be a whole number from 0 to {MAX_FACTORIAL}"
        )
    return math.factorial(n)


def _whole(x: Number, what: str) -> int:
    """Return ``x`` as an int, or raise if it is not a whole number."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, int):
        return x
    raise CalculationError(f"{what} must be a whole number")


# name -> (implementation, min args, max args or None for any number)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "log": (math.log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "exp": (math.exp, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "degrees": (math.degrees, 1, 1),
    "radians": (math.radians, 1, 1),
    "factorial": (_factorial, 1, 1),
    "min": (lambda *a: min(a), 1, None),
    "max": (lambda *a: max(a), 1, None),
    "hypot": (math.hypot, 1, None),
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_ALLOWED = ", ".join(sorted(_FUNCTIONS) + sorted(_CONSTANTS))

_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}

# Spoken / typographic forms -> Python operators, applied in order.
_WORD = r"(?<![a-z_]){}(?![a-z0-9_])"
_REWRITES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?:(?<![a-z_])percent|%)\s+of(?![a-z0-9_])"), " / 100 * "),
    (re.compile(_WORD.format(r"percent")), " / 100 "),
    (re.compile(_WORD.format(r"to\s+the\s+power\s+of")), " ** "),
    (re.compile(_WORD.format(r"divided\s+by")), " / "),
    (re.compile(_WORD.format(r"(?:multiplied\s+by|times)")), " * "),
    (re.compile(_WORD.format(r"plus")), " + "),
    (re.compile(_WORD.format(r"minus")), " - "),
    # "12x13", "(2)x(3)", "12 x 13": a lone x between operands means multiply.
    (re.compile(r"(?<=[\d).])\s*x\s*(?=[\d.(])|(?<=[\w).])\s+x\s+(?=[\w.(])"), " * "),
    (re.compile("[\u00d7\u22c5\u2217]"), " * "),  # multiplication sign, dot operator, asterisk
    (re.compile("[\u00f7\u2215]"), " / "),  # division sign, division slash
    (re.compile("[\u2212\u2013]"), "-"),  # minus sign, en dash
    (re.compile(r"\^"), "**"),
]
_PLAIN_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?")


def normalize(expression: str) -> str:
    """Rewrite spoken and typographic operators into Python syntax (lower-cased)."""
    text = expression.strip().lower()
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def check_arithmetic(expression: str) -> None:
    """Raise CalculationError unless ``expression`` is arithmetic this module can evaluate
    (numbers, operators, the allowed names and functions), without evaluating it."""
    tree = _parse(expression)
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Name):
            if node.id not in _CONSTANTS and node.id not in _FUNCTIONS:
                raise CalculationError(f"unknown name '{node.id}'; allowed: {_ALLOWED}")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
                raise CalculationError("unsupported expression")
        elif not isinstance(node, ast.Constant | ast.UnaryOp | ast.BinOp | ast.operator |
                            ast.unaryop | ast.expr_context):
            raise CalculationError("unsupported expression")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely; raise CalculationError on any problem."""
    tree = _parse(expression)
    try:
        return _eval(tree.body)
    except RecursionError:
        raise CalculationError(f"expression is nested too deeply (max {MAX_DEPTH})") from None


def _parse(expression: str) -> ast.Expression:
    """The checked syntax tree of an expression (CalculationError when it is not one)."""
    if not isinstance(expression, str):
        raise CalculationError("expression must be a string")
    if len(expression) > MAX_LENGTH:
        raise CalculationError(
            f"expression too long ({len(expression)} characters, max {MAX_LENGTH})"
        )
    text = normalize(expression)
    if not text:
        raise CalculationError("empty expression")
    _check_brackets(text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculationError(f"could not parse {expression.strip()!r}: {exc.msg}") from None
    except (ValueError, MemoryError, RecursionError):
        raise CalculationError(f"could not parse {expression.strip()!r}") from None
    _check_tree(tree, text)
    return tree


def format_number(value: int | float) -> str:
    """Render a result for speech: ints exactly, floats to 10 significant digits."""
    if isinstance(value, int):
        return str(int(value))
    text = f"{value:.10g}"
    return "0" if text == "-0" else text


def _check_brackets(text: str) -> None:
    """Refuse bracket nesting deeper than MAX_DEPTH (before the parser sees it)."""
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
            if depth > MAX_DEPTH:
                raise CalculationError(f"expression is nested too deeply (max {MAX_DEPTH})")
        elif char in ")]}":
            depth -= 1


def _check_tree(tree: ast.Expression, text: str) -> None:
    """Enforce the node budget and accept only plain decimal number literals."""
    nodes = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr):
            continue
        nodes += 1
        if nodes > MAX_NODES:
            raise CalculationError(f"expression too complex (more than {MAX_NODES} parts)")
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            source = ast.get_source_segment(text, node) or ""
            if not _PLAIN_NUMBER.fullmatch(source):
                raise CalculationError(
                    f"unsupported number {source!r}; use plain digits like 1000, 2.5 or 1e3"
                )


def _eval(node: ast.expr) -> Number:
    """Evaluate one whitelisted node."""
    if isinstance(node, ast.Constant):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in _FUNCTIONS:
            raise CalculationError(f"'{node.id}' is a function; call it like {node.id}(x)")
        raise CalculationError(f"unknown name '{node.id}'; allowed: {_ALLOWED}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _binop(node.op, _eval(node.left), _eval(node.right))
    if isinstance(node, ast.Call):
        return _call(node)
    raise CalculationError("unsupported expression")


def _binop(op: ast.operator, a: Number, b: Number) -> Number:
    """Apply a binary operator after refusing results that would be too large."""
    if isinstance(op, ast.Pow):
        _check_power(a, b)
    elif (
        isinstance(op, ast.Mult)
        and isinstance(a, int)
        and isinstance(b, int)
        and a.bit_length() + b.bit_length() > MAX_INT_BITS + 1
    ):
        raise _too_large()
    return _guarded(_BINOPS[type(op)], [a, b])


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse powers with a huge exponent or a result beyond the size limits."""
    if abs(exponent) > MAX_EXPONENT:
        raise CalculationError(f"exponent too large (max {MAX_EXPONENT} in absolute value)")
    if base == 0 or abs(base) == 1:
        return
    if float(exponent) * math.log10(abs(base)) > MAX_RESULT_DIGITS:
        raise _too_large(f"more than about 10**{MAX_RESULT_DIGITS}")
    both_int = isinstance(base, int) and isinstance(exponent, int)
    if both_int and float(exponent) * math.log2(abs(base)) > MAX_INT_BITS + 1:
        raise _too_large()


def _call(node: ast.Call) -> Number:
    """Call a whitelisted function with positional numeric arguments."""
    if not isinstance(node.func, ast.Name) or node.keywords:
        raise CalculationError("unsupported expression")
    name = node.func.id
    if name not in _FUNCTIONS:
        if name in _CONSTANTS:
            raise CalculationError(f"'{name}' is a constant, not a function")
        raise CalculationError(f"unknown name '{name}'; allowed: {_ALLOWED}")
    func, low, high = _FUNCTIONS[name]
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise CalculationError("unsupported expression")
    if not low <= len(node.args) <= (high if high is not None else len(node.args)):
        wanted = f"{low}" if low == high else f"{low} to {high}" if high else f"at least {low}"
        raise CalculationError(f"{name}() takes {wanted} argument(s), got {len(node.args)}")
    return _guarded(func, [_eval(arg) for arg in node.args], name)


def _guarded(func: Callable[..., Number], args: list[Number], name: str = "") -> Number:
    """Run ``func(*args)`` and turn arithmetic exceptions into CalculationError."""
    try:
        result = func(*args)
    except ZeroDivisionError:
        raise CalculationError("division by zero") from None
    except OverflowError:
        raise CalculationError("result is not a finite number") from None
    except ValueError as exc:
        if isinstance(exc, CalculationError):
            raise
        where = f" in {name}()" if name else ""
        raise CalculationError(f"math domain error{where}") from None
    except TypeError:
        raise CalculationError("unsupported expression") from None
    return _checked(result)


def _checked(value: object) -> Number:
    """Accept only finite floats and ints within MAX_INT_BITS."""
    if isinstance(value, complex):
        raise CalculationError("result is not a real number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculationError("unsupported expression")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError("result is not a finite number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _too_large()
    return value


def _too_large(
    limit: str = f"integers are limited to {MAX_INT_BITS} bits, about 1233 digits",
) -> CalculationError:
    """The error for results beyond a size limit."""
    return CalculationError(f"result too large ({limit})")
