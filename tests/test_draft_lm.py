"""The standalone draft LM: building, training (deterministic, resumable), storing, loading."""

from __future__ import annotations

import json

import pytest
import torch

from simspec.distill.corpus import teacher_pass
from simspec.distill.trainer import LMTrainConfig, LMTrainer
from simspec.engine.draft_lm import DraftLMShape, build_draft_lm, save_draft_lm
from simspec.engine.drafter import CausalLMDrafter
from simspec.engine.load import load_drafter
from simspec.engine.lossless import compare
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies import StaticPolicy
from simspec.shipped import shipped_drafter

pytestmark = pytest.mark.model  # every test here runs the demo target, or the tiny one with its tokenizer

TINY = DraftLMShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)


@pytest.fixture(scope="module")
def tiny_corpus(target, prompt_ids):
    return teacher_pass(target, [ids[:64] for _, ids in prompt_ids], seq_len=64)


@pytest.fixture(scope="module")
def tiny_lm_dir(target, tmp_path_factory):
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("lm")
    save_draft_lm(directory, build_draft_lm(target, TINY), target.tokenizer, torch.arange(600) * 11, {"kind": "lm"})
    return directory


def test_embedding_starts_from_the_targets_principal_directions(target):
    model = build_draft_lm(target, TINY)
    assert model.get_input_embeddings().weight.shape == (target.model.config.vocab_size, 32)
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    # Tokens the target embeds alike stay alike: similarities correlate with the target's.
    ids = torch.arange(200, 400)
    mine, theirs = model.get_input_embeddings().weight[ids], target.model.get_input_embeddings().weight[ids]
    sim_mine = torch.nn.functional.normalize(mine - mine.mean(0), dim=1)
    sim_theirs = torch.nn.functional.normalize(theirs - theirs.mean(0), dim=1)
    a, b = (sim_mine @ sim_mine.T).flatten(), (sim_theirs @ sim_theirs.T).flatten()
    assert torch.corrcoef(torch.stack([a, b]))[0, 1] > 0.5


def test_training_learns_and_resumes_to_the_same_weights(target, tiny_corpus, tmp_path):
    cfg = LMTrainConfig(draft_vocab=512, epochs=6, batch=2, lr=3e-3, seed=3, shape=TINY)
    whole = LMTrainer(target, tiny_corpus, cfg)
    whole.train(tmp_path / "a" / "checkpoint.pt")
    assert whole.history[-1]["loss"] < whole.history[0]["loss"] - 1.0

    def interrupt(stats):
        if stats["step"] == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LMTrainer(target, tiny_corpus, cfg).train(tmp_path / "b" / "checkpoint.pt", interrupt, checkpoint_every=3)
    resumed = LMTrainer(target, tiny_corpus, cfg)
    resumed._resume(tmp_path / "b" / "checkpoint.pt")
    assert resumed.step == 6  # the last checkpoint before the interruption
    before = resumed.seconds  # the stopped run's time up to its checkpoint is carried on, not dropped
    assert before > 0
    resumed.train(tmp_path / "b" / "checkpoint.pt")
    assert resumed.step == whole.step
    assert resumed.seconds > before
    for p, q in zip(whole.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(p, q)


def test_reduced_vocabulary_drafter_is_lossless(tiny_target, prompt_ids, tiny_lm_dir):
    """The draft LM over 600 of the vocabulary's tokens, loaded for the tiny target that shares the
    demo target's tokenizer (the id map is the drafter's; any target with that tokenizer runs it)."""
    drafter = load_drafter(str(tiny_lm_dir), tiny_target)
    assert isinstance(drafter, CausalLMDrafter) and len(drafter.draft_vocab) == 600
    engine = SpeculativeEngine(tiny_target, drafter)
    for _, ids in prompt_ids[:2]:
        reference = engine.greedy(ids, 16).tokens
        for depth, width, size in [(4, 3, 8), (6, 10, 40)]:
            tokens = engine.generate(ids, StaticPolicy(depth, width, size), 16).tokens
            assert compare(tiny_target, ids, tokens, reference) is None


@pytest.mark.parametrize("damage", ["vocab ids", "weights", "other vocabulary"])
def test_bad_lm_files_are_one_clear_error(target, tiny_lm_dir, tmp_path, damage):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_lm_dir, broken)
    if damage == "vocab ids":
        from safetensors.torch import save_file

        save_file({"vocab_ids": torch.tensor([1, 2, 10**6])}, str(broken / "draft_vocab.safetensors"))
        expected = "outside the target's vocabulary"
    elif damage == "weights":
        (broken / "model.safetensors").write_bytes(b"\0" * 64)
        expected = "could not load model"
    else:
        config = json.loads((broken / "config.json").read_text())
        config["vocab_size"] = 32000
        (broken / "config.json").write_text(json.dumps(config))
        expected = "could not load model|predicts 32000 tokens"
    with pytest.raises(SimspecError, match=expected):
        load_drafter(str(broken), target)


def test_shipped_lm_drafter_accepts_and_is_lossless(target, prompt_ids):
    assert (shipped_drafter("lm") / "model.safetensors").is_file(), "the demo draft LM must ship"
    engine = SpeculativeEngine(target, load_drafter("lm", target))
    taus = []
    for _, ids in prompt_ids:
        reference = engine.greedy(ids, 24).tokens
        generation = engine.generate(ids, StaticPolicy(5, 4, 12), 24)
        assert compare(target, ids, generation.tokens, reference) is None
        taus.append(generation.tau)
    assert sum(taus) / len(taus) > 1.2
