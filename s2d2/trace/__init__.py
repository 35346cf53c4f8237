"""The versioned trace: the contract between the decoding engine and every viewer.

    fields.py   bounded JSON field types shared by every file schema (traces, sweep results)
    records.py  one dataclass per thing the decoder does: forwards, steps, drafts, verifications, commits, edits
    rules.py    the cross-field rules checked after the types and bounds
    file.py     the Trace itself: reading, checking, replay and JSON encoding

`from s2d2.trace import Trace, StepRecord, ...` is the public way in; the layout inside may change.
"""
from __future__ import annotations

from .file import Trace, encode, trace_json_schema
from .records import (BLOCK_EVENTS, COMMIT_HOWS, FORWARD_KINDS, MAX_VOCAB, PROVENANCE, SCHEMA_VERSION, BlockEvent,
                      BlockRecord, Candidate, Commit, CostTable, DecodedIn, Edit, Footer, ForwardCost, ForwardRecord,
                      Header, InFlight, MaskDraft, ModelInfo, PolicyDecision, PolicyInputs, StepCosts, StepRecord,
                      Verification, VerifyPosition)
from .rules import check_trace

__all__ = ["SCHEMA_VERSION", "FORWARD_KINDS", "COMMIT_HOWS", "BLOCK_EVENTS", "PROVENANCE", "MAX_VOCAB", "Candidate",
           "ModelInfo", "ForwardRecord", "MaskDraft", "PolicyInputs", "PolicyDecision", "VerifyPosition",
           "Verification", "CostTable", "ForwardCost", "StepCosts", "Commit", "Edit", "InFlight", "BlockEvent",
           "StepRecord", "BlockRecord", "DecodedIn", "Header", "Footer", "Trace", "check_trace", "encode", "trace_json_schema"]
