"""The teacher corpus's prompt pools (``simspec.distill.sources``): later ShareGPT turns with the
conversation so far, stubs from installed packages, each on the train side of the split."""

from __future__ import annotations

import itertools
import random

import pytest

from simspec.data import VALIDATION_FRACTION, in_validation, load_prompts, split_of
from simspec.distill.sources import _dialogue, in_split, package_stubs, sharegpt_conversations, sharegpt_later_turns
from simspec.errors import SimspecError


def test_a_dialogue_alternates_from_a_human_turn_and_stops_where_it_breaks():
    turn = lambda who, text: {"from": who, "value": text}  # noqa: E731
    record = {"conversations": [turn("human", "a"), turn("gpt", "b"), turn("human", "c"), turn("human", "d"),
                                turn("gpt", "e")]}
    assert _dialogue(record) == [("user", "a"), ("assistant", "b"), ("user", "c")]
    assert _dialogue({"conversations": [turn("gpt", "x"), turn("human", "y")]}) is None
    assert _dialogue({"conversations": [turn("human", "a"), turn("gpt", " ")]}) is None


def test_later_turns_end_in_a_user_turn_of_a_train_conversation():
    prompts = sharegpt_later_turns("train", max_turns=3)
    assert len(prompts) > 100
    for messages in prompts:
        assert split_of(messages[0]["content"]) == "train"  # the conversation's split, as the prompt sets'
        assert len(messages) in (3, 5) and messages[-1]["role"] == "user"
        assert [m["role"] for m in messages[:2]] == ["user", "assistant"]
    held = sharegpt_later_turns("heldout", max_turns=3)
    assert not {m[0]["content"] for m in held} & {m[0]["content"] for m in prompts}


def test_package_stubs_are_documented_functions_read_lazily_in_a_seeded_order(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "site-packages"
    for k in range(6):
        (site / f"pkg{k}").mkdir(parents=True)
        doc = "then scale the sum by y and return the product."
        body = "\n".join(f'def f{k}_{j}(x, y):\n    """Add {k} and {j} to x, {doc}"""\n'
                         f"    return (x + {k + j}) * y\n" for j in range(3))
        (site / f"pkg{k}" / "mod.py").write_text(body + "\ndef bare(x):\n    return x\n")
    (site / "broken.py").write_text("def (:\n")
    monkeypatch.setattr("sys.path", [str(site)])
    first = list(package_stubs(random.Random(0)))
    assert len(first) == 18 and all(s.startswith("def f") and '"""' in s for s in first)  # no bare, no broken
    assert list(itertools.islice(package_stubs(random.Random(0)), 5)) == first[:5]
    assert first != list(package_stubs(random.Random(1)))  # another seed, another file order


def test_validation_cuts_the_train_side_in_two_by_a_hash_of_its_own():
    """--validation: fit and validation partition the train side (never a held-out prompt), in about
    1/16 of it, drawn independently of the train/held-out split, for every pool's key text."""
    texts = [p.text for p in load_prompts("sharegpt")] + [p.text for p in load_prompts("humaneval")]
    train = {t for t in texts if split_of(t) == "train"}
    fit = {t for t in texts if in_split(t, "fit")}
    validation = {t for t in texts if in_split(t, "validation")}
    assert fit | validation == train and not fit & validation
    assert abs(len(validation) / len(train) - VALIDATION_FRACTION) < 0.015
    # its own draw: the held-out side would hold as large a share of validation-bucket texts
    held = [t for t in texts if split_of(t) == "heldout"]
    assert abs(sum(map(in_validation, held)) / len(held) - VALIDATION_FRACTION) < 0.015
    for pool in (sharegpt_conversations, lambda split: [m[0]["content"] for m in sharegpt_later_turns(split, 2)]):
        keys = lambda split: {q if isinstance(q, str) else q[0] for q in pool(split)}  # noqa: E731
        assert keys("fit") | keys("validation") == keys("train") and not keys("fit") & keys("validation")
        assert keys("validation") and not keys("validation") & keys("heldout")


def test_train_draft_with_validation_trains_on_the_rest_and_scores_the_slice():
    from simspec.distill.corpus import CorpusSpec
    from simspec.distill.run import TrainDraftRequest

    train, heldout, validation = TrainDraftRequest(validation=True).corpus_specs()
    assert (train.split, heldout.split, validation.split) == ("fit", "heldout", "validation")
    assert validation.sources == ("self",) and validation.seed != heldout.seed
    plain = TrainDraftRequest().corpus_specs()
    assert plain[0].split == "train" and plain[2] is None  # the shipped recipes' corpora are unchanged
    assert plain[0].key("t") != train.key("t")
    with pytest.raises(SimspecError, match="unknown corpus split 'test'"):
        CorpusSpec(("self",), 4096, split="test")


def test_the_eagle3_trainer_multiplies_in_bf16_only_where_the_cpu_does():
    """Emulated bf16 matmuls train ~100x slower than fp32 (measured on an AVX2 EPYC)."""
    from simspec.distill.run import TrainDraftRequest
    from simspec.engine.models import native_bf16

    assert TrainDraftRequest().eagle3_config().autocast_bf16 == native_bf16()


def test_parts_cut_every_split_into_disjoint_pieces_that_make_it_whole():
    """train-draft --part K/N: each part its own K-th of every pool (a third hash, independent of the
    splits': each part holds about 1/N of the train and of the validation side), the parts together
    the whole split, and a part never reaches a held-out prompt."""
    texts = [p.text for p in load_prompts("sharegpt")] + [p.text for p in load_prompts("humaneval")]
    for split in ("train", "validation"):
        whole = {t for t in texts if in_split(t, split)}
        parts = [{t for t in texts if in_split(t, split, (k, 3))} for k in (1, 2, 3)]
        assert set().union(*parts) == whole and sum(map(len, parts)) == len(whole)
        assert all(abs(len(p) / len(whole) - 1 / 3) < 0.04 for p in parts), [len(p) for p in parts]
    assert not {t for t in texts if in_split(t, "train", (2, 3))} & {t for t in texts if split_of(t) == "heldout"}
    turns = lambda part: {m[0]["content"] for m in sharegpt_later_turns("train", part=part)}  # noqa: E731
    assert turns((1, 2)) | turns((2, 2)) == turns(None) and not turns((1, 2)) & turns((2, 2))


def test_a_part_is_its_own_corpus_and_the_whole_keeps_its_cache_key():
    from simspec.distill.corpus import CorpusSpec
    from simspec.distill.run import TrainDraftRequest

    whole = CorpusSpec(("self", "code"), 480000, (0.5, 0.5), split="fit")
    assert whole.key("SmolLM2-135M-Instruct") == "e81b9c30ffe10f81"  # the key before parts existed
    train, heldout, validation = TrainDraftRequest(part="2/4", validation=True).corpus_specs()
    assert train.part == (2, 4) and heldout.part is None and validation.part is None
    assert len({CorpusSpec(("self",), 4096, part=p).key("t") for p in (None, (1, 2), (2, 2))}) == 3
    for bad in ("5/4", "1/1", "0/3", "half", "2"):
        with pytest.raises(SimspecError, match="--part takes K/N"):
            TrainDraftRequest(part=bad).corpus_specs()
