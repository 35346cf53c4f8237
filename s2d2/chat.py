"""A model's chat template applied to messages, with any failure of the template as one readable ValueError.

Transformers renders chat templates in Jinja's sandbox, which stops a template that reaches for Python internals
(`''.__class__.__mro__`) with jinja2's SecurityError; that, a syntax error or a template's own raise_exception()
are all jinja2 TemplateErrors, and a local model folder is untrusted input: the user gets one line naming the
problem, never a traceback.
"""
from __future__ import annotations

from typing import Any

MAX_MESSAGE_CHARS = 200


def render_chat(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """The prompt text `tokenizer`'s chat template makes of `messages`; ValueError (one line) when it fails."""
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)
    except TemplateError as exc:
        detail = " ".join(str(exc).split())[:MAX_MESSAGE_CHARS]
        raise ValueError(f"the model's chat template failed ({type(exc).__name__}: {detail}); fix or remove "
                         "chat_template in its folder") from None
