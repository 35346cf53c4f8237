"""Bounded JSON field types for the file schemas (traces, sweep results), and their errors as one readable line.

Schemas are plain stdlib dataclasses whose fields are annotated with the types below; pydantic validates them
(`load_as`) and publishes their JSON Schema (`json_schema`). Every list is bounded and stops at its first bad item,
so a hostile file costs at most one error, and every scalar is strict (no "12" for 12, no 3.0 for 3, no true for 1).
"""
from __future__ import annotations

import json
import math
from functools import cache
from typing import Annotated, Any, Optional

from pydantic import (AfterValidator, BeforeValidator, ConfigDict, Field, Strict, TypeAdapter, ValidationError,
                      WithJsonSchema, with_config)
from pydantic_core import from_json

from ..limits import int_text

MAX_TEXT = 20_000  # prompt and output text
MAX_TOKEN_TEXT = 256  # the string of one token
MAX_NAME = 200  # names, kinds, one-line reasons
MAX_FREE_TEXT = 1_000  # a string inside a free-form object
MAX_INT = 2**31 - 1  # ids, positions, counts
MAX_TOP = 64  # top-k candidates kept per distribution; keys of a free-form object
MAX_ITEMS = 1 << 16  # any other list (cross-field rules bound them much tighter, relative to the run)
MAX_DEPTH = 6  # nesting of free-form objects (config, policy details)
NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _nonfinite(value: Any) -> Any:
    """Non-finite floats are not JSON: files store them as "inf" / "-inf" / "nan" strings."""
    return NONFINITE[value] if isinstance(value, str) and value in NONFINITE else value


def as_float(value: Any) -> Optional[float]:
    """A float from a free-form trace value (config, policy details): a number (an int too large for a float reads
    as ±inf) or a string files store for a non-finite float; None for anything else (None, bools, lists, text)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str) and value in NONFINITE:
        return NONFINITE[value]
    return None


def _plain(value: dict[str, Any]) -> dict[str, Any]:
    """Free-form objects hold only bounded JSON; the strings of non-finite floats become floats again."""
    def walk(v: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(v, dict):
            if len(v) > MAX_TOP or any(not isinstance(k, str) or len(k) > MAX_NAME for k in v):
                raise ValueError(f"at most {MAX_TOP} keys, each a string of at most {MAX_NAME} characters")
            return {k: walk(x, depth + 1) for k, x in v.items()}
        if isinstance(v, list):
            if len(v) > MAX_ITEMS:
                raise ValueError(f"a list longer than {MAX_ITEMS} items")
            return [walk(x, depth + 1) for x in v]
        if isinstance(v, str):
            if len(v) > MAX_FREE_TEXT:
                raise ValueError(f"a string longer than {MAX_FREE_TEXT} characters")
            return _nonfinite(v)
        if v is None or isinstance(v, (bool, int, float)):
            return v
        raise ValueError(f"unsupported value of type {type(v).__name__}")

    return walk(value, 1)


def items(item: Any, most: int = MAX_ITEMS) -> Any:
    """A list of at most `most` items; validation stops at the first bad one."""
    return Annotated[list[item], Field(max_length=most, fail_fast=True)]


Int = Annotated[int, Strict(), Field(ge=-1, le=MAX_INT)]  # -1 means "none" (prefill block, commit step)
Count = Annotated[int, Strict(), Field(ge=0, le=MAX_INT)]
Bool = Annotated[bool, Strict()]
Num = Annotated[float, Strict(), BeforeValidator(_nonfinite),
                WithJsonSchema({"anyOf": [{"type": "number"}, {"enum": list(NONFINITE)}]})]
Seconds = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
Prob = Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)]  # a probability
Text = Annotated[str, Strict(), Field(max_length=MAX_TEXT)]
TokenText = Annotated[str, Strict(), Field(max_length=MAX_TOKEN_TEXT)]
Name = Annotated[str, Strict(), Field(max_length=MAX_NAME)]
Free = Annotated[dict[str, Any], AfterValidator(_plain)]
Pair = Annotated[list[Int], Field(min_length=2, max_length=2)]  # [start, end) or [start, length]
forbid_extra = with_config(ConfigDict(extra="forbid"))  # class decorator: unknown keys are an error


@cache
def _adapter(tp: Any) -> TypeAdapter:
    return TypeAdapter(tp)


def parse_json(text: str | bytes, root: str) -> Any:
    """Plain data from JSON text. The parser bounds nesting, so `[[[[...` is an error, never a RecursionError."""
    try:
        return from_json(text)
    except ValueError as exc:
        raise ValueError(f"{root}: not valid JSON ({str(exc)[:120]})") from None


def load_as(tp: Any, data: Any, root: str) -> Any:
    """Validate plain data against a schema type and build it; ValueError with one readable line
    ("trace.steps[3].window: at least 2 items (got [5])") on the first problem."""
    try:
        return _adapter(tp).validate_python(data)
    except ValidationError as exc:
        raise ValueError(describe(exc, root)) from None
    except RecursionError:
        raise ValueError(f"{root}: nested too deeply") from None


def json_schema(tp: Any) -> dict[str, Any]:
    return _adapter(tp).json_schema()


_PLAIN = {  # pydantic error type -> our wording (the others keep pydantic's message)
    "int_type": "expected an integer", "int_from_float": "expected an integer", "int_parsing": "expected an integer",
    "float_type": "expected a number", "bool_type": "expected true or false", "string_type": "expected a string",
    "list_type": "expected a list", "dict_type": "expected an object", "dataclass_type": "expected an object",
    "dataclass_args_type": "expected an object", "missing": "missing", "missing_argument": "missing",
    "unexpected_keyword_argument": "unknown field", "extra_forbidden": "unknown field",
    "finite_number": "expected a finite number",
}
_NO_VALUE = {"missing", "missing_argument", "unexpected_keyword_argument", "extra_forbidden"}


_BOUNDS = {"greater_than_equal": (">=", "ge"), "less_than_equal": ("<=", "le"), "greater_than": (">", "gt"),
           "less_than": ("<", "lt")}


def describe(exc: ValidationError, root: str) -> str:
    """The first error of a pydantic ValidationError as "path: problem (got value)"."""
    err = exc.errors(include_url=False)[0]
    path = root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"] if not _internal(p))
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _PLAIN:
        problem = _PLAIN[kind]
    elif kind == "string_too_long":
        problem = f"longer than {ctx.get('max_length')} characters"
    elif kind == "too_long":
        problem = f"at most {ctx.get('max_length')} items"
    elif kind == "too_short":
        problem = f"at least {ctx.get('min_length')} items"
    elif kind == "literal_error":
        problem = f"must be one of {ctx.get('expected')}"
    elif kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        problem = f"must be {sign} {ctx.get(key)}"
    else:
        problem = str(err.get("msg", kind)).removeprefix("Value error, ")
    return f"{path}: {problem}" + ("" if kind in _NO_VALUE else f" (got {shown(err.get('input'))})")


def _internal(part: Any) -> bool:
    """pydantic's own loc entries (validator function names, union tags) are not field names."""
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))


def shown(value: Any, limit: int = 40) -> str:
    """A short printable form of an offending value (a hostile value is never echoed in full)."""
    if isinstance(value, (dict, list)):
        if len(value) > 8:
            return f"{type(value).__name__} of {len(value)} items"
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = type(value).__name__
        return text if len(text) <= limit else text[: limit - 1] + "…"
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[: limit - 1] + "…")
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value)
    return str(value)[:limit]
