"""The teacher corpus: the self-distilled text (hours of generation for a real corpus) is kept in
the text store a run names, so another machine repeats only the teacher pass; without one it is
dropped once the corpus is cached. On the tiny random target with the demo target's tokenizer and
chat template (conftest.py): the store and the cache work alike for any target."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import torch

from simspec.distill.corpus import CorpusSpec, build_corpus

pytestmark = pytest.mark.model

SPEC = CorpusSpec(("self",), tokens=200, seq_len=96, self_new_tokens=3, split="train")


def _quiet(description, total):
    return lambda n=1, **kw: None


def _rows(corpus):
    return {tuple(t[v].tolist()) for t, v in zip(corpus.tokens, corpus.valid)}


def test_kept_text_rebuilds_the_corpus_without_generating_it_again(tiny_target, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMSPEC_CACHE", str(tmp_path / "cache"))
    keep = tmp_path / "teacher-text"
    first = build_corpus(tiny_target, SPEC, _quiet, text_store=keep)
    (shard,) = keep.glob("*.jsonl.gz")
    lines = [json.loads(line) for line in gzip.open(shard, "rt")]
    assert len(lines) == len(first.tokens) >= 2
    # The cached corpus gone (another machine), the kept text is used as stored: a mark in it
    # reaches the rebuilt corpus's tokens.
    for cached in (tmp_path / "cache" / "distill").glob("*/corpus.pt"):
        shutil.rmtree(cached.parent)
    lines[0]["c"][0] = (lines[0]["c"][0] + 1) % tiny_target.model.config.vocab_size
    with gzip.open(shard, "wt") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))
    again = build_corpus(tiny_target, SPEC, _quiet, text_store=keep)
    marked = [row for row in _rows(again) if row not in _rows(first)]
    assert len(marked) == 1 and lines[0]["c"][0] in marked[0]


def test_without_a_folder_the_text_is_dropped_once_the_corpus_is_cached(tiny_target, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMSPEC_CACHE", str(tmp_path / "cache"))
    build_corpus(tiny_target, SPEC, _quiet)
    distill = tmp_path / "cache" / "distill"
    assert list(distill.glob("*/corpus.pt")) and not list(distill.glob("*.text"))


def test_the_cached_corpus_maps_its_features_and_a_damaged_cache_is_rebuilt(tiny_target, tmp_path, monkeypatch):
    """Features live in files mapped into memory (a 2 M-token corpus's exceed a 24 GB machine's
    RAM): what a cache hit reads equals what the teacher pass wrote, and a truncated file (a
    build killed mid-write, a full disk) is rebuilt, not read short."""
    monkeypatch.setenv("SIMSPEC_CACHE", str(tmp_path / "cache"))
    built = build_corpus(tiny_target, SPEC, _quiet)
    (folder,) = (tmp_path / "cache" / "distill").glob("*/corpus.pt")
    folder = folder.parent
    assert (folder / "aux.f16").stat().st_size == built.aux.numel() * 2
    cached = build_corpus(tiny_target, SPEC, _quiet)
    for name in ("tokens", "features", "aux", "labels", "valid"):
        assert torch.equal(getattr(cached, name), getattr(built, name)), name
    assert cached.features.abs().sum() > 0 and cached.meta == json.loads(json.dumps(built.meta))
    expected = built.features.clone()  # the mapping of a file cut short reads past its end: SIGBUS
    del built, cached
    with (folder / "features.f16").open("r+b") as f:
        f.truncate(100)
    rebuilt = build_corpus(tiny_target, SPEC, _quiet)
    assert torch.equal(rebuilt.features, expected)
    assert (folder / "features.f16").stat().st_size == expected.numel() * 2


def test_text_only_fills_the_store_and_a_build_from_it_generates_nothing(tiny_target, tmp_path, monkeypatch):
    """``train-draft --text-only``: the corpora's self-distilled text goes to the store and nothing
    else is made; the corpus built from the store afterwards generates no token."""
    import time

    from simspec.distill.run import generate_text
    from simspec.distill.textstore import TextStore

    monkeypatch.setenv("SIMSPEC_CACHE", str(tmp_path / "cache"))
    store = tmp_path / "teacher-text"
    summary = generate_text(tiny_target, (SPEC,), store, _quiet, time.perf_counter(), batch=4)
    assert summary["new_rows"] == summary["rows"] >= 2 and summary["generated_tokens"] == 3 * summary["rows"]
    assert not list((tmp_path / "cache").rglob("corpus.pt"))  # no teacher pass ran
    again = generate_text(tiny_target, (SPEC,), store, _quiet, time.perf_counter(), batch=4)
    assert again["new_rows"] == again["generated_tokens"] == 0 and again["rows"] == summary["rows"]
    rows = len(TextStore(store))
    build_corpus(tiny_target, SPEC, _quiet, text_store=store)
    assert len(TextStore(store)) == rows and len(list(store.glob("*.jsonl.gz"))) == 1
