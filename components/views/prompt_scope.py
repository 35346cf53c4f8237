"""What the bundled models know, said where the prompt is typed and in the result: the two tiny models were trained on
short arithmetic word problems and on Jane Austen's novels; the app asks them in the chat format, so only a word
problem of that kind gets a meaningful answer (other text gets Austen-like prose). A prompt outside it is noticed
cheaply (the task's own grammar, s2d2.tasks.arithmetic.solve) and gets one line offering prompts that fit: questions
of the held-out set, which no training stream contains. Pure: no gradio, no model. A word problem in its own words
gets a milder line (`close_to_taught`)."""
from __future__ import annotations

import re
from typing import Any

from s2d2.limits import limits
from s2d2.tasks.arithmetic import heldout, solve

BUNDLED = ("tiny", "tiny-llada2", "tiny-shift")  # the registry names of the models shipped with the app (assets/)
TRAINED_ON = ("The bundled models (tiny and tiny-llada2, 3 and 5 million parameters) were trained on two things "
              "only: short arithmetic word problems like the examples below, and Jane Austen's six novels. Other "
              "text gets Austen-like prose or a muddle, not a real answer.")


def fitting_prompts(n: int = 3) -> list[str]:
    """`n` questions the bundled models can answer: the first of the held-out set (never trained on)."""
    return [p.question for p in heldout(n)]


def fits(prompt: Any) -> bool:
    """True when `prompt` is a word problem in the arithmetic task's grammar (a start, one to three steps, and
    "How many … does X have now?"), the only kind of question the bundled models were taught."""
    return isinstance(prompt, str) and solve(prompt.strip()) is not None


def close_to_taught(prompt: str) -> bool:
    """A word problem in its own words ("Tom has 5 apples and buys 3 more. How many apples does he have now?"):
    someone has a number of things and the question asks how many. Not the task's grammar (`fits`), but close
    enough that the bundled models often answer it right (newcomer walk: this one was, under a warning that
    called it nonsense)."""
    return bool(_HAS_N.search(prompt)) and bool(_HOW_MANY.search(prompt))


_HAS_N = re.compile(r"\b[A-Z][a-z]+ (?:has|had|owns) \d+ \w+")
_HOW_MANY = re.compile(r"\bhow many\b", re.IGNORECASE)


def is_bundled(model_name: Any) -> bool:
    return isinstance(model_name, str) and model_name.strip() in BUNDLED


def scope_note(prompt: Any, model_name: Any, real_models: tuple[str, ...] = ()) -> str:
    """One line for a prompt the bundled model was not trained for ("" when it fits, or for another model); with
    `real_models` (allowed checkpoints on a machine with a GPU) it points to them for open-ended prompts. A prompt
    longer than a run takes gets none: the line under the box already says it must be shortened first, and a second
    warning about its content would be one line too many (newcomer walk: a pasted 50,000 characters got three)."""
    if not is_bundled(model_name) or not isinstance(prompt, str) or not prompt.strip():
        return ""
    if len(prompt) > limits().max_prompt_chars or fits(prompt):
        return ""
    if close_to_taught(prompt):  # a word problem worded its own way: often answered, never called nonsense
        return (f"ℹ **{model_name.strip()}** learned word problems worded exactly like the examples under the box "
                "(one fact per sentence, then \"How many … does Anna have now?\"). Worded otherwise it often still "
                "answers, but less reliably.")
    line = (f"⚠ **{model_name.strip()}** only knows two things: short arithmetic word problems (\"Anna has 23 "
            "stickers. She buys 5 more. How many stickers does Anna have now?\") and Jane Austen's novels. This "
            "prompt is not a word problem of that form, so it gets Austen-like prose or a muddle, not a real answer. "
            "Pick one of the example prompts under the box")
    if real_models:
        line += f", or a real checkpoint in Model ({', '.join(real_models[:3])}) for open-ended text"
    return line + "."


def real_checkpoints(allowed: list[str], gpu: bool) -> tuple[str, ...]:
    """The allowed models that are real checkpoints (not bundled), offered only where a GPU can run them."""
    return tuple(n for n in allowed if n not in BUNDLED) if gpu else ()
