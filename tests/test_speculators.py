"""EAGLE-3 heads in the speculators format (vLLM's ``Eagle3Speculator``) and in the public layout
with its layer named ``layers.0.*``, at the demo target's sizes with random weights: both load
through ``--draft PATH`` to the same head as the canonical layout and decode losslessly; a head
written in the speculators format has what vLLM's reader requires and reads back unchanged; what
simspec cannot run is one line naming the field."""

from __future__ import annotations

import json

import pytest
import torch
from test_eagle_public import DRAFT_VOCAB, MAX_NEW, H, eagle3_config, eagle3_tensors, write

from simspec.engine.load import load_drafter
from simspec.engine.lossless import compare
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies import StaticPolicy

pytestmark = pytest.mark.model

LAYER = {"model_type": "llama", "hidden_size": H, "intermediate_size": 1536, "num_attention_heads": 9,
         "num_key_value_heads": 3, "head_dim": 64, "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": 1e-5,
         "rope_theta": 100000.0, "max_position_embeddings": 8192, "vocab_size": 49152, "tie_word_embeddings": False}


def speculators_config(**top) -> dict:
    config = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
              "speculators_version": "0.1.0", "transformer_layer_config": dict(LAYER),
              "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False, "target_hidden_size": None,
              "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                     "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                     "verifier": {"name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
                                                  "architectures": ["LlamaForCausalLM"]}}}
    config.update(top)
    return config


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    """The same random head three ways: canonical, ``layers.0.*``, speculators (with its embedding)."""
    root = tmp_path_factory.mktemp("heads")
    speculators = eagle3_tensors(prefix="layers.0.")
    speculators["embed_tokens.weight"] = torch.zeros(49152, H, dtype=torch.bfloat16)
    return {"canonical": write(root / "canonical", eagle3_config(), eagle3_tensors()),
            "layers.0": write(root / "layers0", eagle3_config(), eagle3_tensors(prefix="layers.0.")),
            "speculators": write(root / "speculators", speculators_config(), speculators)}


@pytest.mark.parametrize("layout", ["speculators", "layers.0"])
def test_the_layout_loads_to_the_canonical_head_and_decodes_losslessly(layout, heads, target, prompt_ids):
    drafter = load_drafter(str(heads[layout]), target)
    reference = load_drafter(str(heads["canonical"]), target)
    for name, weight in reference.head.state_dict().items():
        assert torch.equal(drafter.head.state_dict()[name], weight), name
    engine = SpeculativeEngine(target, drafter)
    pid, ids = prompt_ids[1]
    # the weights are the canonical head's, whose lossless grid test_eagle_public runs: one tree here
    greedy = engine.greedy(ids, MAX_NEW).tokens
    out = engine.generate(ids, StaticPolicy(3, 4, 8), MAX_NEW)
    divergence = compare(target, ids, out.tokens, greedy)
    assert divergence is None or divergence.near_tie, (layout, divergence.describe())


def test_a_head_written_as_speculators_has_what_vllm_reads_and_reads_back(heads, target, tmp_path):
    from simspec.engine.speculators import save_speculators

    head = load_drafter(str(heads["canonical"]), target).head
    save_speculators(tmp_path / "out", head, target, {"by": "test"}, "HuggingFaceTB/SmolLM2-135M-Instruct", 4)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    # vLLM's speculators reader: these four, and the decoder layer's fields as a Llama config
    assert config["speculators_model_type"] == "eagle3" and isinstance(config["transformer_layer_config"], dict)
    assert config["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 4
    assert config["speculators_config"]["verifier"]["name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert config["transformer_layer_config"]["hidden_size"] == H and config["draft_vocab_size"] == DRAFT_VOCAB
    from safetensors import safe_open

    with safe_open(str(tmp_path / "out" / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert "layers.0.self_attn.q_proj.weight" in names and not any(n.startswith("midlayer.") for n in names)
    assert {"embed_tokens.weight", "fc.weight", "d2t", "t2d", "lm_head.weight"} <= names
    again = load_drafter(str(tmp_path / "out"), target).head
    for name, weight in head.state_dict().items():  # fp16 on disk: equal to the head rounded once
        expected = weight if name in ("d2t", "t2d") else weight.to(torch.float16).to(weight.dtype)
        assert torch.equal(again.state_dict()[name], expected), name


@pytest.mark.parametrize("change, message", [
    (dict(speculators_model_type="eagle"), "'speculators_model_type' is 'eagle': simspec reads eagle3"),
    (dict(transformer_layer_config=None), "'transformer_layer_config' must be an object"),
    (dict(transformer_layer_config={**LAYER, "model_type": "qwen3"}), "'qwen3': simspec runs Llama decoder layers"),
    (dict(norm_before_fc=True), "'norm_before_fc' is set: simspec's EAGLE-3 head has no such norm"),
    (dict(target_hidden_size=1024), "'target_hidden_size' is 1024, but target"),
])
def test_a_speculators_head_simspec_cannot_run_is_one_line(change, message, heads, target, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(speculators_config(**change)))
    (folder / "model.safetensors").symlink_to(heads["speculators"] / "model.safetensors")
    with pytest.raises(SimspecError) as caught:
        load_drafter(str(folder), target)
    assert message in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


@pytest.mark.parametrize("layout", ["speculators", "public"])
def test_export_draft_writes_a_head_that_reads_back_equal(layout, heads, target, tmp_path):
    from helpers import cli, last_json

    result = cli("export-draft", "--draft", str(heads["canonical"]), "--layout", layout, "--out", str(tmp_path / "x"),
                 "--json")
    assert result.returncode == 0, result.stderr
    assert last_json(result)["layout"] == layout
    config = json.loads((tmp_path / "x" / "config.json").read_text())
    assert ("speculators_config" in config) == (layout == "speculators")
    head, again = (load_drafter(str(p), target).head for p in (heads["canonical"], tmp_path / "x"))
    for name, weight in head.state_dict().items():  # fp16 on disk: equal to the head rounded once
        expected = weight if name in ("d2t", "t2d") else weight.to(torch.float16).to(weight.dtype)
        assert torch.equal(again.state_dict()[name], expected), name
