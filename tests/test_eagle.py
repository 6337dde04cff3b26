"""The EAGLE-style feature drafter: plumbing, files, and (shipped weights) real acceptance."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from simspec.distill.trainer import reduced_vocabulary
from simspec.engine.eagle import EagleConfig, EagleDrafter, EagleHead, load_eagle, save_eagle
from simspec.engine.load import load_drafter
from simspec.engine.lossless import compare
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies import StaticPolicy
from simspec.shipped import shipped_drafter

MAX_NEW = 16
# fp16 storage moves this random head's draft log-probs by < 1e-3 (measured: 9e-4); scaling one
# weight matrix by 1% moves them by 0.04, another random head by ~5.
ROUND_TRIP_ATOL = 5e-3


def saved_random_head(target, directory):
    """A randomly initialised head for ``target`` over 512 draft tokens, saved to ``directory``."""
    torch.manual_seed(0)
    head = EagleHead(EagleConfig.for_target(target, draft_vocab=512))
    save_eagle(directory, head, torch.arange(512) * 7, {"target": target.name})
    return head


@pytest.fixture(scope="module")
def random_eagle(target, tmp_path_factory):
    """A randomly initialised head (kept in memory) and the folder it was saved to."""
    directory = tmp_path_factory.mktemp("eagle")
    return saved_random_head(target, directory), directory


@pytest.fixture(scope="module")
def random_eagle_dir(random_eagle):
    return random_eagle[1]


@pytest.mark.model
def test_random_head_is_lossless_across_shapes(tiny_target, prompt_ids, tmp_path):
    """A random head saved and loaded for the tiny target that shares the demo tokenizer: the
    head's files, features and id map as for any target, at a few percent of the demo's forwards."""
    saved_random_head(tiny_target, tmp_path)
    engine = SpeculativeEngine(tiny_target, load_drafter(str(tmp_path), tiny_target))
    pid, ids = prompt_ids[1]
    greedy = engine.greedy(ids, MAX_NEW).tokens
    for depth, width, size in [(1, 1, 1), (3, 1, 3), (5, 4, 16), (8, 10, 60)]:
        out = engine.generate(ids, StaticPolicy(depth, width, size), MAX_NEW)
        divergence = compare(tiny_target, ids, out.tokens, greedy)
        assert divergence is None or divergence.near_tie, divergence.describe()
        assert all(c.draft_calls == depth - 1 for c in out.cycles)


@pytest.mark.model
def test_save_load_round_trip_keeps_outputs(target, random_eagle):
    """The loaded drafter against the in-memory head that was saved: weights equal to it rounded
    to fp16 (the storage format), and the same draft distribution within that rounding."""
    head, directory = random_eagle
    rows = target.model.get_output_embeddings().weight[torch.arange(512) * 7]
    saved = EagleDrafter(copy.deepcopy(head).bind(rows), torch.arange(512) * 7, target, "in-memory")
    loaded = load_drafter(str(directory), target)
    assert isinstance(loaded, EagleDrafter) and loaded.draft_vocab.tolist() == saved.draft_vocab.tolist()
    stored = loaded.head.state_dict()
    assert stored.keys() == head.state_dict().keys()
    for name, weight in head.state_dict().items():
        torch.testing.assert_close(stored[name], weight.to(torch.float16).float(), rtol=0, atol=0, msg=name)
    hidden_size = target.model.config.hidden_size
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(5, hidden_size, generator=generator)  # hidden-state-like features, not constants
    outputs = []
    for drafter in (saved, loaded):
        drafter.reset(torch.tensor([1, 2, 3, 4]), features[:4])
        drafter.commit(torch.tensor([5]), features[4:])
        outputs.append(drafter.draft_root())
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=ROUND_TRIP_ATOL)
    assert torch.equal(outputs[1].topk(5).indices, outputs[0].topk(5).indices)


def test_reduced_vocabulary_keeps_frequent_and_always_tokens():
    labels = torch.tensor([[5, 5, 5, 9, 9, 3, 1]])
    valid = torch.ones_like(labels, dtype=torch.bool)
    assert reduced_vocabulary(labels, valid, 3, always=[2]).tolist() == [2, 5, 9]


@pytest.mark.model
@pytest.mark.parametrize("damage", ["missing weights", "corrupt weights", "other target", "not a drafter"])
def test_bad_drafter_files_are_one_clear_error(target, random_eagle_dir, tmp_path, damage):
    broken = tmp_path / "broken"
    broken.mkdir()
    config = json.loads((random_eagle_dir / "config.json").read_text())
    weights = (random_eagle_dir / "model.safetensors").read_bytes()
    if damage == "corrupt weights":
        weights = weights[:1000]
    if damage == "other target":
        config["config"]["hidden"] = 960
    if damage == "not a drafter":
        config["format"] = "something-else"
    (broken / "config.json").write_text(json.dumps(config))
    if damage != "missing weights":
        (broken / "model.safetensors").write_bytes(weights)
    with pytest.raises(SimspecError) as exc:
        load_eagle(broken, target, "broken")
    assert "\n" not in str(exc.value)
    expected = {"missing weights": "missing or corrupt", "corrupt weights": "missing or corrupt",
                "other target": "made for a target with hidden size 960", "not a drafter": "not a simspec-eagle"}
    assert expected[damage] in str(exc.value)


@pytest.mark.model
def test_shipped_eagle_drafter_accepts_and_is_lossless(target, prompt_ids):
    assert (shipped_drafter("eagle") / "model.safetensors").is_file(), "the demo EAGLE drafter must ship"
    engine = SpeculativeEngine(target, load_drafter("eagle", target))
    pid, ids = prompt_ids[0]
    greedy = engine.greedy(ids, 32).tokens
    out = engine.generate(ids, StaticPolicy(6, 4, 24), 32)
    divergence = compare(target, ids, out.tokens, greedy)
    assert divergence is None or divergence.near_tie, divergence.describe()
    assert out.tau > 1.5
