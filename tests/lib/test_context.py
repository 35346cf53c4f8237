"""A sequence's layout (decoding/context.py): from host ints or from a tensor, the same ids; the shared position
index is arange and is never grown under a sequence that holds a view of it."""
from __future__ import annotations

import torch

from s2d2.decoding.context import position_index, sequence_ids


def test_sequence_ids_from_host_ints_equal_the_tensor_path():
    prompt = [5, 0, 7, 2**40]
    from_ints = sequence_ids(prompt, 9, 3, torch.device("cpu"))
    from_tensor = sequence_ids(torch.tensor(prompt), 9, 3, torch.device("cpu"))
    assert from_ints.dtype == torch.long and from_ints.tolist() == from_tensor.tolist() == prompt + [3] * 5
    from_ints[0] = 1  # its own storage: writing one sequence touches no other
    assert sequence_ids(prompt, 9, 3, torch.device("cpu"))[0] == 5


def test_position_index_is_arange_and_a_longer_one_leaves_older_views_intact():
    short = position_index(10, torch.device("cpu"))
    longer = position_index(9000, torch.device("cpu"))
    assert short.tolist() == list(range(10)) and longer.tolist() == list(range(9000))
    assert not short.is_inference() and not longer.is_inference()
