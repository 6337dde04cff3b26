"""Batched greedy generation (teacher text, trace continuations) on a tiny real Llama: a killed
run resumes from its checkpoint to the same text, without generating the finished batches again."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import TINY_VOCAB

from simspec.engine.greedy import greedy_continuations, resumable_continuations

NEW, BATCH = 6, 2


@pytest.fixture(scope="module")
def prompts():
    rng = np.random.default_rng(0)
    return [rng.integers(0, TINY_VOCAB, size=n).tolist() for n in (3, 5, 4, 7, 2, 6, 5, 3)]


def test_killed_generation_resumes_to_the_same_text_from_its_checkpoint(tiny, prompts, tmp_path):
    whole = greedy_continuations(tiny, prompts, NEW, BATCH)
    partial = tmp_path / "corpus.self.partial.json"
    ticks = []

    def killed_in_third_batch(n):
        ticks.append(n)
        if len(ticks) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        resumable_continuations(tiny, prompts, NEW, BATCH, partial, killed_in_third_batch, every_s=0)
    saved = json.loads(partial.read_text())["outputs"]
    assert len(saved) == 2 * BATCH  # the two batches finished before the kill
    assert all(seq == whole[int(i)] for i, seq in saved.items())
    assert resumable_continuations(tiny, prompts, NEW, BATCH, partial) == whole

    # The resumed run takes the checkpoint's text as it stands (it does not generate it again) ...
    blob = json.loads(partial.read_text())
    marked = next(iter(blob["outputs"]))
    assert whole[int(marked)] != prompts[int(marked)] + [0] * NEW
    blob["outputs"][marked] = prompts[int(marked)] + [0] * NEW
    partial.write_text(json.dumps(blob))
    resumed = resumable_continuations(tiny, prompts, NEW, BATCH, partial)
    assert resumed[int(marked)] == prompts[int(marked)] + [0] * NEW
    assert ([s for i, s in enumerate(resumed) if i != int(marked)]
            == [s for i, s in enumerate(whole) if i != int(marked)])
    # ... but only for the same work: another length starts over.
    longer = resumable_continuations(tiny, prompts, NEW + 1, BATCH, partial)
    assert longer == greedy_continuations(tiny, prompts, NEW + 1, BATCH)


def test_finished_text_is_kept_in_the_checkpoint_so_a_rerun_generates_nothing(tiny, prompts, tmp_path):
    partial = tmp_path / "corpus.self.partial.json"
    whole = resumable_continuations(tiny, prompts, NEW, BATCH, partial, every_s=3600)  # no periodic save
    blob = json.loads(partial.read_text())
    assert {int(i): seq for i, seq in blob["outputs"].items()} == dict(enumerate(whole))
    # A rerun takes the finished text as stored: a mark written into it comes back.
    blob["outputs"]["0"] = prompts[0] + [1] * NEW
    partial.write_text(json.dumps(blob))
    assert resumable_continuations(tiny, prompts, NEW, BATCH, partial)[0] == prompts[0] + [1] * NEW


def test_sampled_generation_is_seeded_per_batch_and_resumes_to_the_same_text(tiny, prompts, tmp_path):
    greedy = greedy_continuations(tiny, prompts, NEW, BATCH)
    sampled = greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=3)
    assert sampled == greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=3)
    assert sampled != greedy and sampled != greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=4)
    # a batch's draws depend on its seed and first prompt only: skipping finished batches changes nothing
    partial = tmp_path / "corpus.selft1.partial.json"
    done = {i: sampled[i] for i in range(len(prompts)) if i % 2 == 0}
    assert greedy_continuations(tiny, prompts, NEW, BATCH, done=done, temperature=1.0, seed=3) == sampled
    assert resumable_continuations(tiny, prompts, NEW, BATCH, partial, temperature=1.0, seed=3) == sampled
    # greedy and sampled text are different work: the greedy run does not take the sampled checkpoint
    assert resumable_continuations(tiny, prompts, NEW, BATCH, partial) == greedy


def test_a_batch_stops_once_every_row_has_emitted_a_stop_token(tiny, prompts):
    whole = greedy_continuations(tiny, prompts, NEW, BATCH)
    second = frozenset(seq[len(p) + 1] for seq, p in zip(whole, prompts))  # every row emits one by token 2
    stopped = greedy_continuations(tiny, prompts, NEW, BATCH, stop=second)
    for full, cut, prompt in zip(whole, stopped, prompts):
        assert full[:len(cut)] == cut and 1 <= len(cut) - len(prompt) <= 2  # the same text, cut short
    # a row that stopped first rides along until its batch-mate stops: one batch ends at token 2
    assert any(len(cut) - len(p) == 2 for cut, p in zip(stopped, prompts))
    assert greedy_continuations(tiny, prompts, NEW, BATCH, stop=frozenset({TINY_VOCAB + 5})) == whole
