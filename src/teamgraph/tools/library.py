"""teamgraph's general-purpose tool library, registered into a :class:`ToolRegistry`: the offline
tools (``calculator``, ``current_time``, ``python`` — the sandbox) here, the online ones in
:mod:`teamgraph.tools.web`.
"""

from __future__ import annotations

import ast
import contextlib
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from teamgraph.tools.web import (
    ERROR_HANDLING,
    make_http_get_tool,
    make_stock_quote_tool,
    make_weather_tool,
    make_web_search_tool,
)

if TYPE_CHECKING:  # no runtime import: registry.py may import this module at its top
    from teamgraph.sandbox import Sandbox
    from teamgraph.tools.registry import ToolFactory, ToolRegistry, ToolResources


def _calculator(resources: ToolResources) -> BaseTool:
    return make_calculator_tool()


def _http_get(resources: ToolResources) -> BaseTool:
    return make_http_get_tool()


def _web_search(resources: ToolResources) -> BaseTool:
    return make_web_search_tool()


def _weather(resources: ToolResources) -> BaseTool:
    return make_weather_tool()


def _stock_quote(resources: ToolResources) -> BaseTool:
    return make_stock_quote_tool()


def _current_time(resources: ToolResources) -> BaseTool:
    return make_current_time_tool()


def _python(resources: ToolResources) -> BaseTool:
    return make_python_tool()


LIBRARY: dict[str, ToolFactory] = {
    "python": _python,
    "calculator": _calculator,
    "http_get": _http_get,
    "web_search": _web_search,
    "weather": _weather,
    "stock_quote": _stock_quote,
    "current_time": _current_time,
}


def register_library(registry: ToolRegistry) -> None:
    """Register ``python`` (the sandbox), ``calculator``, ``http_get``, ``web_search``,
    ``weather``, ``stock_quote`` and ``current_time`` (each built fresh per request;
    ``http_get`` allows any host)."""
    for name, factory in LIBRARY.items():
        registry.register(name, factory)


# --- calculator: safe arithmetic over an ``ast`` whitelist (never ``eval``), with size guards.
Number = int | float
CALCULATOR_DESCRIPTION = (
    "Evaluate an arithmetic expression: add, subtract, multiply, divide, powers (**), modulo, "
    "sqrt, log, exp, trig (sin, cos, tan), factorial, round, min/max, with constants pi, e, tau. "
    "Use it for any math calculation or numeric computation, e.g. '2 * (3 + 4) ** 2'."
)
MAX_EXPRESSION_CHARS = 1000
MAX_BITS = 10_000  # largest integer allowed anywhere in a calculation (about 3000 digits)
MAX_FACTORIAL = 1000
_FAILURES: dict[type[Exception], str] = {ZeroDivisionError: "division by zero",
    OverflowError: "result too large", RecursionError: "expression too deeply nested"}  # fmt: skip
_CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}  # fmt: skip


def _factorial(n: Number) -> int:
    if n != int(n) or not 0 <= n <= MAX_FACTORIAL:
        raise ValueError(f"factorial needs an integer from 0 to {MAX_FACTORIAL}, got {n}")
    return math.factorial(int(n))


def _round(x: Number, digits: Number = 0) -> Number:
    if digits != int(digits):
        raise ValueError("round() needs a whole number of digits")
    return round(x) if digits == 0 else round(x, int(digits))


_MATH = "sqrt log log10 log2 exp sin cos tan asin acos atan atan2 floor ceil degrees radians hypot"
_FUNCTIONS: dict[str, Callable[..., Number]] = {name: getattr(math, name) for name in _MATH.split()}
_FUNCTIONS |= {"round": _round, "abs": abs, "factorial": _factorial}
_FUNCTIONS |= {"min": lambda *args: min(args), "max": lambda *args: max(args)}
_ARITY = {"log": (1, 2), "atan2": (2, 2), "round": (1, 2), "min": (1, 50), "max": (1, 50),
          "hypot": (1, 50)}  # fmt: skip


class CalculatorInput(BaseModel):
    """Arguments of the ``calculator`` tool."""

    expression: str = Field(description="Arithmetic expression, e.g. 'sqrt(2) * (3 + 4) ** 2'.")


def evaluate(expression: str) -> Number:
    """Value of ``expression``; raises :class:`ToolException` with a clear message on bad input."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolException(f"expression too long (over {MAX_EXPRESSION_CHARS} characters)")
    try:
        return _eval(ast.parse(expression.strip(), mode="eval").body)
    except SyntaxError as exc:
        raise ToolException(f"invalid expression: {exc.msg}") from None
    except (ZeroDivisionError, OverflowError, RecursionError) as exc:
        raise ToolException(_FAILURES[type(exc)]) from None
    except ValueError as exc:  # math domain errors, bad factorial or round arguments
        raise ToolException(f"math error: {exc}") from None


def calculator(expression: str) -> str:
    """``expression = value``, the value as an integer or with up to 15 significant digits."""
    value = evaluate(expression)
    shown = str(value) if isinstance(value, int) else format(value, ".15g")
    return f"{' '.join(expression.split())} = {shown}"


def make_calculator_tool() -> BaseTool:
    """Build the ``calculator`` tool; errors come back as the tool's text result."""

    async def acalculator(expression: str) -> str:
        return calculator(expression)

    return StructuredTool.from_function(
        calculator, acalculator, "calculator", CALCULATOR_DESCRIPTION, args_schema=CalculatorInput,
        **ERROR_HANDLING,
    )  # fmt: skip


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        raise ToolException(f"unsupported constant {node.value!r}: only numbers are allowed")
    if isinstance(node, ast.Name):
        if node.id not in _CONSTANTS:
            raise ToolException(f"unknown name {node.id!r}")
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        return -_eval(node.operand) if isinstance(node.op, ast.USub) else _eval(node.operand)
    if isinstance(node, ast.BinOp):
        return _checked(_binary(node.op, _eval(node.left), _eval(node.right)))
    if isinstance(node, ast.Call):
        return _checked(_call(node))
    raise ToolException(f"unsupported syntax: {type(node).__name__}")


def _binary(op: ast.operator, left: Number, right: Number) -> Number:
    if isinstance(op, ast.Pow):
        _check_power(left, right)
        return left**right
    if type(op) not in _BINARY:
        hint = " (use ** for powers)" if isinstance(op, ast.BitXor) else ""
        raise ToolException(f"unsupported operator: {type(op).__name__}{hint}")
    return _BINARY[type(op)](left, right)


def _check_power(base: Number, exponent: Number) -> None:
    """Estimate an integer power's size before computing it: ``9 ** 9 ** 9`` must not hang."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or abs(base) <= 1:
        return
    if exponent * math.log2(abs(base)) > MAX_BITS:
        raise ToolException(f"result too large: {base} ** {exponent}")


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name):
        raise ToolException(f"unsupported syntax: {type(node.func).__name__}")
    name = node.func.id
    if name not in _FUNCTIONS:
        raise ToolException(f"unknown function {name!r}")
    fewest, most = _ARITY.get(name, (1, 1))
    if node.keywords or not fewest <= len(node.args) <= most:
        count = fewest if fewest == most else f"{fewest} to {most}"
        raise ToolException(f"{name}() takes {count} positional argument(s)")
    return _FUNCTIONS[name](*(_eval(arg) for arg in node.args))


def _checked(value: Number) -> Number:
    if isinstance(value, complex):  # e.g. (-8) ** 0.5
        raise ToolException("result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise ToolException("result too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolException("result too large" if math.isinf(value) else "result is not a number")
    return value


# --- current_time: the current date and time in an IANA timezone (``zoneinfo``).
CURRENT_TIME_DESCRIPTION = (
    "Current date and time now in a timezone (an IANA name such as Region/City, or UTC): the "
    "date today, clock time, day of the week and UTC offset."
)
_UTC_ALIASES = {"", "utc", "gmt", "z", "zulu", "universal"}


class CurrentTimeInput(BaseModel):
    """Arguments of the ``current_time`` tool."""

    timezone: str = Field(
        default="UTC",
        description="IANA timezone name such as 'Europe/Paris' or 'UTC' (a zone's city, "
        "e.g. 'Tokyo', also works).",
    )


def zone(name: str) -> ZoneInfo:
    """The ``ZoneInfo`` called ``name``: an IANA key, ``UTC``/``GMT`` in any case, or the city
    part of a key (``"new york"`` → ``America/New_York``); a clear error otherwise."""
    name = name.strip()
    if name.lower() in _UTC_ALIASES:
        return ZoneInfo("UTC")
    with contextlib.suppress(ZoneInfoNotFoundError, ValueError, OSError):
        return ZoneInfo(name)
    city = "/" + name.lower().replace(" ", "_")
    keys = sorted(key for key in available_timezones() if key.lower().endswith(city))
    if keys:
        return ZoneInfo(keys[0])
    raise ToolException(
        f"unknown timezone {name!r}: use an IANA name such as 'Europe/Paris', "
        "'America/New_York' or 'UTC'"
    )


def make_current_time_tool(clock: Callable[[], datetime] | None = None) -> BaseTool:
    """Build ``current_time``; ``clock`` (an aware-datetime source) is for tests."""
    now = clock or (lambda: datetime.now(UTC))

    def current_time(timezone: str = "UTC") -> str:
        tz = zone(timezone)
        local = now().astimezone(tz)
        return f"{local.isoformat(timespec='seconds')} ({tz.key}, {local:%A}, {local.tzname()})"

    async def acurrent_time(timezone: str = "UTC") -> str:
        return current_time(timezone)

    return StructuredTool.from_function(
        current_time,
        acurrent_time,
        "current_time",
        CURRENT_TIME_DESCRIPTION,
        args_schema=CurrentTimeInput,
        **ERROR_HANDLING,
    )


# --- python: the LangChain tool that runs a model's Python code in teamgraph's sandbox.
TOOL_NAME = "python"
TOOL_DESCRIPTION = (
    "Run Python code in an isolated sandbox (no network, no access outside a temporary working "
    "directory, CPU and memory limits); returns stdout, stderr, the value of the last "
    "expression and any error."
)


class PythonInput(BaseModel):
    """Arguments of the ``python`` tool."""

    code: str = Field(
        description="Python source to run; the value of a final expression is returned."
    )


def make_python_tool(sandbox: Sandbox | None = None) -> BaseTool:
    """Build the ``python`` tool over ``sandbox`` (a default ``Sandbox()`` when ``None``).

    The result is ``ExecResult.to_text()``. When isolation is unavailable the tool returns
    ``code execution refused: <reason>`` instead of raising, so the model sees why.
    """
    from teamgraph.sandbox import Sandbox, SandboxUnavailable  # loaded when a team uses it

    runner = sandbox if sandbox is not None else Sandbox()

    async def run_python(code: str) -> str:
        try:
            result = await runner.run(code)
        except SandboxUnavailable as exc:
            return f"code execution refused: {exc}"
        return result.to_text()

    return StructuredTool.from_function(
        coroutine=run_python,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        args_schema=PythonInput,
    )
