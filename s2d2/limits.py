"""The bounds on work that untrusted input may ask for: one table, read by the app, the CLI and the trace reader.

A public Space faces hostile uploads and impatient visitors, so every number that drives work (prompt size,
tokens to generate, trace sizes, seconds per run) is checked against these bounds before any work starts. A
Space operator changes them with the environment variables below (read at call time, so tests can set them).

| variable | default | bounds |
|---|---|---|
| S2D2_MAX_PROMPT_CHARS | 2000 | characters of a prompt typed into the app or the CLI |
| S2D2_MAX_PROMPT_TOKENS | 2048 | prompt tokens after the chat template (runs and uploaded traces) |
| S2D2_MAX_GEN_TOKENS | 512 | tokens to generate (runs, Compare lanes, uploaded traces) |
| S2D2_MAX_BLOCK_LENGTH | 64 | block length B (runs and uploaded traces) |
| S2D2_MAX_RUN_SECONDS | 120 | wall seconds of one Run, or of all Compare lanes together |
| S2D2_MAX_UPLOAD_MB | 5 | size of an uploaded trace or sweep results file |
| S2D2_MAX_LOADED_MODELS | 2 | models kept in memory (least recently used evicted) |
| S2D2_QUEUE_SIZE | 128 | events waiting in the app's queue (Gradio's max_size) |
| S2D2_MAX_SESSIONS | 400 | browser sessions whose state is kept (oldest dropped) |

Structural caps that need no tuning (strings, top-k lists, vocabulary size) are constants next to the schema they
bound (s2d2/trace/records.py).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

SEED_MAX = 2**31 - 1  # seeds in [0, SEED_MAX], as the app's Seed box and torch.Generator.manual_seed accept


@dataclass(frozen=True)
class Limits:
    max_prompt_chars: int = 2000
    max_prompt_tokens: int = 2048
    max_gen_tokens: int = 512
    max_block_length: int = 64
    max_run_seconds: float = 120.0
    max_upload_mb: float = 5.0
    max_loaded_models: int = 2
    queue_size: int = 128  # two units' full backlogs (2 x S2D2_UNIT_QUEUED, 48) and spare places fit: a stranger's
    # full backlog never leaves a class behind it without room (components/serve/fair_places.py shares the rest)
    max_sessions: int = 400

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_total_length(self) -> int:
        """Longest sequence a run may need: prompt + generation, padded to a whole block."""
        return self.max_prompt_tokens + self.max_gen_tokens + self.max_block_length - 1


ENV = {f.name: "S2D2_" + f.name.upper() for f in dataclasses.fields(Limits)}


def limits() -> Limits:
    """The bounds in force: defaults overridden by S2D2_* environment variables (a bad value is an error)."""
    values = {}
    for f in dataclasses.fields(Limits):
        raw = os.environ.get(ENV[f.name], "").strip()
        if not raw:
            continue
        cast = float if f.type in ("float", float) else int
        try:
            value = cast(raw)
        except ValueError:
            raise ValueError(f"{ENV[f.name]}: expected a number, got {raw[:40]!r}") from None
        if value <= 0:
            raise ValueError(f"{ENV[f.name]}: must be positive, got {raw[:40]}")
        values[f.name] = value
    return Limits(**values)


def check_seed(seed: object, name: str = "seed") -> int:
    """A seed as an int in [0, SEED_MAX] (a whole float such as a UI number is accepted); ValueError naming the
    bound otherwise (never an overflow later)."""
    if isinstance(seed, float) and seed.is_integer():
        if not 0 <= seed <= SEED_MAX:  # said as typed: int(1e99) has 99 digits, not the 100 of 10^99
            raise ValueError(f"{name}: must be in [0, {SEED_MAX}], got {seed:g}")
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        shown = "nothing" if seed is None else repr(str(seed)[:20])
        raise ValueError(f"{name}: expected a whole number in [0, {SEED_MAX}], got {shown}")
    if not 0 <= seed <= SEED_MAX:
        raise ValueError(f"{name}: must be in [0, {SEED_MAX}], got {int_text(seed)}")
    return seed


def int_text(n: int) -> str:
    """An int as printed in a message: in full when short, else its digit count (str() refuses > 4300 digits)."""
    if abs(n) < 10**20:
        return str(n)
    try:
        return f"a {len(str(abs(n)))}-digit number"
    except ValueError:
        return f"a number of about {int(abs(n).bit_length() * 0.30103) + 1} digits"


def value_text(value: object, limit: int = 40) -> str:
    """Any value as a message quotes it: bounded (a 1 MB string is cut, a huge int is counted, not printed)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value)
    if isinstance(value, (bool, float)) or value is None:
        return repr(value)
    text = value if isinstance(value, str) else str(value)
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


def check_prompt_chars(prompt: str, lim: Limits | None = None) -> None:
    lim = lim or limits()
    if len(prompt) > lim.max_prompt_chars:
        raise ValueError(f"prompt: {len(prompt)} characters; at most {lim.max_prompt_chars} (S2D2_MAX_PROMPT_CHARS)")


def check_lengths(gen_length: int, block_length: int, lim: Limits | None = None) -> None:
    """The generation and block lengths a run may ask for (beyond DecodeConfig's own ranges)."""
    lim = lim or limits()
    if gen_length > lim.max_gen_tokens:
        raise ValueError(f"gen_length: at most {lim.max_gen_tokens} tokens (S2D2_MAX_GEN_TOKENS), got {gen_length}")
    if block_length > lim.max_block_length:
        raise ValueError(f"block_length: at most {lim.max_block_length} (S2D2_MAX_BLOCK_LENGTH), got {block_length}")


def check_prompt_tokens(n: int, lim: Limits | None = None) -> None:
    lim = lim or limits()
    if n > lim.max_prompt_tokens:
        raise ValueError(f"prompt: {n} tokens; at most {lim.max_prompt_tokens} (S2D2_MAX_PROMPT_TOKENS)")
