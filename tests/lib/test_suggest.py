"""The close name said first in an error (s2d2/suggest.py)."""
from __future__ import annotations

import pytest

from s2d2.suggest import did_you_mean


@pytest.mark.parametrize("name, choices, said", [
    ("gen_lenght", ["gen_length", "block_length"], " (did you mean 'gen_length'?)"),
    ("TINYY", ["JetLM/SDAR-1.7B-Chat", "tiny"], " (did you mean 'tiny'?)"),  # case-insensitive, the choice's case
    ("zzzz", ["gen_length", "tiny"], ""),  # nothing close: nothing said
    (None, ["tiny"], ""), (["tiny"], ["tiny"], ""), ("t" * 201, ["t" * 201], ""),  # not a short string: nothing
])
def test_did_you_mean(name, choices, said):
    assert did_you_mean(name, choices) == said
