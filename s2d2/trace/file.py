"""The Trace: a trace file's top level, how it is read and checked, replayed, and encoded as JSON.

A trace is plain data (dataclasses <-> JSON lists, numbers and strings). Figures and replay read it without
touching a model or a tokenizer: decoded token strings are stored next to ids. Random draws are stored, never
redrawn, so a replay is exact.

The dataclasses (here and in records.py) are the one declaration of the file format: their annotated field types
(fields.py) carry the bounds that pydantic checks when a trace is read, and `trace_json_schema()` publishes them as
docs/trace.schema.json. Adding a field is one line. `check_trace` (rules.py) then applies the rules that relate
fields to each other and to the run-size limits (s2d2/limits.py), before any viewer builds an index, a canvas or a
figure. Every rejection is one ValueError line naming the field path and the bound.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Optional

from ..limits import Limits, limits
from ..output import trim_output
from .fields import Bool, forbid_extra, items, json_schema, load_as, parse_json, shown
from .records import SCHEMA_VERSION, BlockRecord, Footer, ForwardRecord, Header, StepRecord
from .rules import check_trace

__all__ = ["Trace", "encode", "trace_json_schema"]


@forbid_extra
@dataclass
class Trace:
    header: Header
    blocks: items(BlockRecord)
    forwards: items(ForwardRecord)
    steps: items(StepRecord)
    footer: Optional[Footer] = None
    detailed: Bool = True  # False: per-mask drafts, top-k and verification rows were not recorded

    # -- serialisation ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return encode(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any, lim: Limits | None = None) -> "Trace":
        """Build a trace from plain data, checking types, bounds and the cross-field rules (`check_trace`) against
        `lim` (s2d2.limits.Limits; default: the limits in force); one ValueError naming the field."""
        if not isinstance(data, dict):
            raise ValueError("trace: expected a JSON object at the top level")
        header = data.get("header")
        version = header.get("schema_version") if isinstance(header, dict) else None
        if version != SCHEMA_VERSION:
            raise ValueError(f"trace.header.schema_version: this viewer reads version {SCHEMA_VERSION}, "
                             f"got {shown(version, 20)}")
        trace = load_as(cls, data, "trace")
        check_trace(trace, lim or limits())
        return trace

    @classmethod
    def from_json(cls, text: str | bytes, lim: Limits | None = None) -> "Trace":
        return cls.from_dict(parse_json(text, "trace"), lim)

    # -- replay ------------------------------------------------------------------------------------------------
    def canvas_at(self, step: int | None = None, mask_id: int | None = None) -> list[int]:
        """Token ids of the whole sequence after `step` steps (None: all), rebuilt from commits alone."""
        mask = self.header.model.mask_id if mask_id is None else mask_id
        ids = [mask] * self.header.total_length
        prompt = self.header.prompt_ids
        ids[: len(prompt)] = prompt
        upto = len(self.steps) if step is None else step
        for s in self.steps[:upto]:
            for c in s.commits:
                ids[c.position] = c.token
            for e in s.edits:  # edits touch decoded positions, commits masked ones: disjoint within a step
                ids[e.position] = e.new
        return ids

    def replay(self) -> list[int]:
        """The output ids rebuilt from the trace alone; equals footer.output_ids."""
        ids = self.canvas_at()
        p = len(self.header.prompt_ids)
        out, _ = trim_output(ids[p:], self.header.gen_length, self.header.model.mask_id, self.header.model.stop_ids)
        return out


def trace_json_schema() -> dict[str, Any]:
    """The JSON Schema of a trace file (published as docs/trace.schema.json)."""
    schema = json_schema(Trace)
    schema["$comment"] = ("Types and bounds only. Cross-field rules (blocks tile the sequence, positions lie in "
                          "their block, counts fit the run) are s2d2/trace/rules.py; run-size limits are "
                          "s2d2/limits.py.")
    return schema

# -- JSON encoding: non-finite floats are not JSON; store them as strings (restored by the reader) ---------------

_FIELDS: dict[type, tuple[str, ...]] = {}


def encode(obj: Any) -> Any:
    """Plain JSON-safe data of a schema dataclass (what a trace file stores). Hand-rolled rather than
    dataclasses.asdict, which deep-copies every leaf: this is several times faster on a large trace."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else ("nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf"))
    if obj is None or isinstance(obj, (str, int)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    names = _FIELDS.get(type(obj))
    if names is None:
        if not dataclasses.is_dataclass(obj):
            return obj
        names = _FIELDS.setdefault(type(obj), tuple(f.name for f in dataclasses.fields(obj)))
    out = {name: encode(getattr(obj, name)) for name in names}
    if out.get("length_reason") == "":  # only adaptive runs write it: fixed-block traces keep their old form
        del out["length_reason"]
    for name in ("edits", "in_flight", "events"):  # only editing / pipeline steps write them: other traces keep
        if out.get(name) == []:  # their old form
            del out[name]
    if "costs" in out and out["costs"] is None:  # only cost-aware runs write them (header, policy inputs)
        del out["costs"]
    if "decoded_in" in out and out["decoded_in"] is None:  # only the page writes it: library traces keep their form
        del out["decoded_in"]
    return out
