"""The static KV cache (``simspec.engine.kv_slots``): after a tree is verified and a path kept,
the cache holds exactly what running the committed sequence from scratch would hold, whether the
path was a prefix of the tree's rows (cropped in place) or not (moved into place), and when the
sequence outgrows the capacity it was given."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simspec.engine.kv_slots import SlotCache
from simspec.engine.target_cache import TargetCache

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
        cache = TargetCache(tiny, capacity=capacity)
        cache.forward(context)
        cache.length = len(context)
        cache.forward(tree, depths, visible)
        cache.keep(np.array(path), len(PARENTS))
        assert cache.cache.get_seq_length() == cache.length == len(context) + len(path)
        stepped = cache.forward(following)

        fresh = TargetCache(tiny, capacity=4)  # grows as it goes
        whole = fresh.forward(torch.cat([context, tree[path], following]))
    assert torch.allclose(stepped, whole[-len(following):], atol=1e-5), (stepped - whole[-2:]).abs().max()


def test_a_cache_is_one_preallocated_buffer_per_layer(tiny):
    cache = SlotCache(tiny.model, 32)
    assert len(cache.layers) == tiny.model.config.num_hidden_layers
    with torch.inference_mode():
        target = TargetCache(tiny, capacity=32)
        target.cache = cache
        target.forward(torch.arange(8))
        buffers = [layer._keys.data_ptr() for layer in cache.layers]
        target.length = 8
        target.forward(torch.arange(4))
        target.cache.crop(-4)
    # written in place: the same storage after more tokens and a crop
    assert [layer._keys.data_ptr() for layer in cache.layers] == buffers
    assert all(layer.keys.shape[-2] == 8 for layer in cache.layers)
