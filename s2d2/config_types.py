"""The type check of one DecodeConfig field (`check_type`), as `DecodeConfig.validate` runs it on every field
first: the annotation's text decides, since the config's annotations are strings (`from __future__ import
annotations`)."""
from __future__ import annotations

import math
from typing import Any


def check_type(name: str, value: Any, annotation: Any) -> None:
    """Raise one ValueError unless `value` fits the field's annotation (bool, int, float or str, each maybe None;
    a NaN is never a number); other annotations take anything."""
    text = str(annotation)
    optional = "None" in text
    if value is None:
        if not optional:
            raise ValueError(f"{name}: must not be None")
        return
    if text.startswith("bool"):
        ok = isinstance(value, bool)
    elif text.startswith("int"):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif text.startswith("float"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and isinstance(value, float) and math.isnan(value):
            raise ValueError(f"{name}: must be a number, got NaN")
    elif text.startswith("str"):
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise ValueError(f"{name}: expected {text.replace(' | None', '')}, got {type(value).__name__} {value!r:.40}")
