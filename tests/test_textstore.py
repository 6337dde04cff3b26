"""The teacher-text store on a tiny real Llama: a killed generation keeps what it finished and a
rerun generates only the rest, to the same text; stored text is used as stored, by any later
request that asks for the same continuation (another budget, another order); other work
(length, temperature, seed) is generated anew; shards roll over, re-save to the same bytes, and
a damaged one is refused in one line."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from helpers import TINY_VOCAB, killed_in_batch

from simspec.distill import textstore
from simspec.distill.textstore import TextStore, stored_continuations
from simspec.engine.greedy import greedy_continuations
from simspec.errors import SimspecError

NEW, BATCH = 6, 2


@pytest.fixture(scope="module")
def prompts():
    rng = np.random.default_rng(0)
    return [rng.integers(0, TINY_VOCAB, size=n).tolist() for n in (3, 5, 4, 7, 2, 6, 5, 3)]


def _rows(folder):
    return {json.loads(line)["k"]: json.loads(line)["c"] for shard in sorted(folder.glob("*.jsonl.gz"))
            for line in gzip.open(shard, "rt")}


def test_a_killed_generation_keeps_its_finished_batches_and_a_rerun_generates_only_the_rest(tiny, prompts, tmp_path):
    whole = greedy_continuations(tiny, prompts, NEW, BATCH)
    with pytest.raises(KeyboardInterrupt):
        stored_continuations(tiny, prompts, NEW, BATCH, TextStore(tmp_path), killed_in_batch(3), every_s=3600)
    kept = _rows(tmp_path)
    assert len(kept) == 2 * BATCH  # the two batches finished before the kill, saved on the way out
    assert sorted(kept.values()) == sorted(seq[len(p):] for seq, p in zip(whole, prompts)
                                           if seq[len(p):] in kept.values())
    store = TextStore(tmp_path)
    assert stored_continuations(tiny, prompts, NEW, BATCH, store) == whole
    assert store.added_tokens == (len(prompts) - 2 * BATCH) * NEW  # only the missing ones were generated
    assert len(_rows(tmp_path)) == len(prompts)


def test_stored_text_is_used_as_stored_by_any_request_for_the_same_continuation(tiny, prompts, tmp_path):
    stored_continuations(tiny, prompts[:3], NEW, BATCH, TextStore(tmp_path))
    (shard,) = tmp_path.glob("*.jsonl.gz")
    lines = [json.loads(line) for line in gzip.open(shard, "rt")]
    lines[0]["c"] = [1] * NEW  # a mark: the rerun must read it, not generate it again
    with gzip.open(shard, "wt") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))
    store = TextStore(tmp_path)
    reordered = prompts[::-1]  # a larger budget, another order: the stored prompts are found by content
    got = stored_continuations(tiny, reordered, NEW, BATCH, store)
    assert got[-1] == prompts[0] + [1] * NEW
    assert store.added_tokens == (len(prompts) - 3) * NEW
    # other work is generated anew: another length, sampling, another sampling seed
    for kwargs in ({"new_tokens": NEW + 1}, {"temperature": 1.0, "seed": 3}, {"temperature": 1.0, "seed": 4}):
        fresh = TextStore(tmp_path)
        new = kwargs.pop("new_tokens", NEW)
        out = stored_continuations(tiny, prompts, new, BATCH, fresh, **kwargs)
        assert fresh.added_tokens == len(prompts) * new
        assert out == greedy_continuations(tiny, prompts, new, BATCH, **kwargs)


def test_shards_roll_over_resave_to_the_same_bytes_and_a_damaged_one_is_refused(tiny, prompts, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setattr(textstore, "SHARD_ROWS", 3)
    store = TextStore(tmp_path)
    for i, p in enumerate(prompts):
        store.add(f"k{i}", p)
        store.save()
    shards = sorted(tmp_path.glob("*.jsonl.gz"))
    assert [len(_rows_of(s)) for s in shards] == [3, 3, 2]
    before = shards[-1].read_bytes()
    store.save()
    assert shards[-1].read_bytes() == before  # no timestamp inside: git sees no change
    assert TextStore(tmp_path).rows == {f"k{i}": p for i, p in enumerate(prompts)}
    shards[0].write_bytes(before[: len(before) // 2])  # a truncated copy
    with pytest.raises(SimspecError, match=f"{shards[0].name} is unreadable.*delete it"):
        TextStore(tmp_path)


def _rows_of(shard):
    return [json.loads(line) for line in gzip.open(shard, "rt")]


def test_a_repeated_prompt_is_generated_once(tiny, prompts, tmp_path):
    repeated = prompts + prompts[:3]
    store = TextStore(tmp_path)
    out = stored_continuations(tiny, repeated, NEW, BATCH, store)
    assert store.added_tokens == len(prompts) * NEW
    assert out == greedy_continuations(tiny, prompts, NEW, BATCH) + out[:3]


def test_text_generated_in_one_dtype_serves_a_build_in_another_and_records_its_dtype(tiny, prompts, tmp_path):
    """The text is a sample of the target's own (the teacher pass labels it again in the build's
    dtype): what fp32 generated on one machine, a bf16 build on another takes as stored."""
    import copy

    import torch

    from simspec.engine.models import LoadedModel

    stored_continuations(tiny, prompts, NEW, BATCH, TextStore(tmp_path))
    assert {row["d"] for shard in tmp_path.glob("*.jsonl.gz") for row in _rows_of(shard)} == {"fp32"}
    bf16 = LoadedModel(tiny.source, copy.deepcopy(tiny.model).to(torch.bfloat16), None)
    store = TextStore(tmp_path)
    assert stored_continuations(bf16, prompts, NEW, BATCH, store) == greedy_continuations(tiny, prompts, NEW, BATCH)
    assert store.added_tokens == 0


def test_a_killed_sampled_generation_resumes_to_the_text_one_run_gives(tiny, prompts, tmp_path):
    whole = greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=5)
    with pytest.raises(KeyboardInterrupt):
        stored_continuations(tiny, prompts, NEW, BATCH, TextStore(tmp_path), killed_in_batch(2),
                             temperature=1.0, seed=5)
    store = TextStore(tmp_path)
    assert len(store) == BATCH
    assert stored_continuations(tiny, prompts, NEW, BATCH, store, temperature=1.0, seed=5) == whole
