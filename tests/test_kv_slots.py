"""The static KV caches (``simspec.engine.kv_rows``): after a tree is
verified and a path kept, the target's cache holds exactly what running the committed sequence
from scratch would hold, whether the path was a prefix of the tree's rows (left in place) or not
(moved into place), and when the sequence outgrows the capacity it was given."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simspec.engine.batch_models import TargetRows
from simspec.engine.kv_rows import RowSlotCache, causal, rows_mask
from simspec.engine.modeling import base_and_head

# a tree over 5 drafted tokens: parents of rows 0..4 (row 0 hangs off the committed context)
PARENTS = [-1, 0, 0, 2, 1]


def _tree_mask() -> tuple[np.ndarray, np.ndarray]:
    n = len(PARENTS)
    visible = np.zeros((n, n), dtype=bool)
    depths = np.zeros(n, dtype=np.int64)
    for i in range(n):
        j = i
        while j >= 0:
            visible[i, j] = True
            j = PARENTS[j]
        depths[i] = visible[i].sum() - 1
    return depths, visible


@pytest.mark.parametrize("path, capacity", [([0, 2, 3], 64), ([0, 1, 4], 64), ([0, 2, 3], 12), ([0], 11)],
                         ids=["moved", "moved-other-branch", "moved-after-growing", "prefix-cropped"])
def test_a_kept_path_continues_as_the_sequence_run_from_scratch(tiny, path, capacity):
    torch.manual_seed(0)
    context = torch.randint(0, tiny.model.config.vocab_size, (10,))
    tree = torch.randint(0, tiny.model.config.vocab_size, (len(PARENTS),))
    following = torch.randint(0, tiny.model.config.vocab_size, (2,))
    depths, visible = _tree_mask()
    with torch.inference_mode():
        rows = TargetRows(tiny, 1, capacity)
        rows.prefill(0, context)
        rows.forward({0: (tree.numpy(), depths, visible)})
        rows.keep(0, np.array(path))
        assert rows.lengths[0] == len(context) + len(path)
        stepped, _ = rows.forward({0: (following.numpy(), np.arange(len(following)), causal(len(following)))})

        whole, _ = TargetRows(tiny, 1, 4).prefill(0, torch.cat([context, tree[path], following]))  # grows
    stepped = stepped[0]
    assert torch.allclose(stepped, whole[-len(following):], atol=1e-5), (stepped - whole[-2:]).abs().max()


def test_a_cache_is_one_preallocated_buffer_per_layer(tiny):
    cache = RowSlotCache(tiny.model, 1, 32)
    assert len(cache.layers) == tiny.model.config.num_hidden_layers
    base = base_and_head(tiny.model)[0]
    with torch.inference_mode():
        cache.begin(0)
        base(input_ids=torch.arange(8)[None], past_key_values=cache, use_cache=True)
        buffers = [s.keys.data_ptr() for s in cache.slots]
        cache.begin(8)
        mask = rows_mask(12, np.array([8]), [causal(4)], np.array([8]), 4, base.dtype, torch.device("cpu"))
        base(input_ids=torch.arange(4)[None], position_ids=torch.arange(8, 12)[None], attention_mask=mask,
             past_key_values=cache, use_cache=True)
    # written in place: the same storage after more tokens
    assert [s.keys.data_ptr() for s in cache.slots] == buffers
    assert all(layer.keys.shape[-2] == 12 for layer in cache.layers)
