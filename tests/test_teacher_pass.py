"""The teacher pass resumes: a 6 M-token corpus's takes hours on a CPU, longer than a session, so a
pass stopped part way keeps its rows on disk and the next one over the same text starts after them,
and ends with exactly what one uninterrupted pass writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import TINY_VOCAB, killed_in_batch

from simspec.distill import corpus as corpus_module
from simspec.distill.corpus import PROGRESS_FILE, teacher_pass


def _texts(seed: int, n: int = 21) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, TINY_VOCAB, size=int(rng.integers(4, 30))).tolist() for _ in range(n)]


def _same(a, b) -> None:
    for name in ("tokens", "features", "aux", "labels", "valid"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_a_stopped_pass_resumes_after_its_rows_and_ends_as_one_whole_pass(tiny, tmp_path):
    texts = _texts(0)
    whole = teacher_pass(tiny, texts, 32, batch=4)
    store = tmp_path / "pass"
    store.mkdir()
    with pytest.raises(KeyboardInterrupt):  # stopped inside its third batch's bookkeeping: two batches whole
        teacher_pass(tiny, texts, 32, batch=4, advance=killed_in_batch(3), store=store)
    assert json.loads((store / PROGRESS_FILE).read_text())["rows_done"] == 8
    ticks: list[int] = []
    resumed = teacher_pass(tiny, texts, 32, batch=4, advance=ticks.append, store=store)
    assert ticks[0] == 8 and sum(ticks) == len(texts) and len(ticks) == 1 + 4  # 13 rows left: 4 batches
    _same(resumed, whole)

    # another text in the same folder starts over rather than mapping the first text's rows
    other = _texts(1)
    with pytest.raises(KeyboardInterrupt):
        teacher_pass(tiny, other, 32, batch=4, advance=killed_in_batch(2), store=store)
    _same(teacher_pass(tiny, other, 32, batch=4, store=store), teacher_pass(tiny, other, 32, batch=4))


def test_progress_is_recorded_as_the_pass_goes(tiny, tmp_path, monkeypatch):
    """Rows written to the mapped files outlive a killed process (the kernel keeps the pages), so
    the progress the pass records as it goes is what a SIGKILL leaves to resume from."""
    monkeypatch.setattr(corpus_module, "PROGRESS_SECONDS", 0.0)
    texts = _texts(2)
    recorded = []

    def advance(n):
        recorded.append(json.loads((tmp_path / PROGRESS_FILE).read_text())["rows_done"]
                        if (tmp_path / PROGRESS_FILE).exists() else 0)
    teacher_pass(tiny, texts, 32, batch=5, advance=advance, store=tmp_path)
    assert recorded == [0, 5, 10, 15, 20]  # read before each batch's record: the rows before it
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["rows_done"] == len(texts)
