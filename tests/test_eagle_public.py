"""Public EAGLE checkpoints (EAGLE-3 and EAGLE-1/2): written here key by key in the published
layout (random weights) at a target's sizes, loaded through ``--draft PATH``, run lossless (on the
tiny target with the demo target's tokenizer: a random head accepts nothing on either), ids mapped
through ``d2t``; every misfit refused in one line naming its key or field (at the demo target's sizes)."""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass
from pathlib import Path

import pytest
import torch

from simspec.engine.eagle import EagleDrafter
from simspec.engine.load import load_drafter
from simspec.engine.lossless import compare
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies import StaticPolicy

pytestmark = pytest.mark.model


@dataclass(frozen=True)
class Sizes:
    """The target's shapes a head is written at (its MLP as wide as the target's)."""

    hidden: int = 576
    heads: int = 9
    kv: int = 3
    head_dim: int = 64
    inter: int = 1536
    vocab: int = 49152


DEMO = Sizes()  # SmolLM2-135M
H, HEADS, KV, HD, INTER, VOCAB = astuple(DEMO)


def sizes_of(target) -> Sizes:
    """The shape simspec gives an EAGLE-3 head for ``target`` (``eagle3_for_target``)."""
    from simspec.engine.eagle_public import eagle3_for_target

    c = eagle3_for_target(target, DRAFT_VOCAB)
    return Sizes(c.hidden, c.heads, c.kv_heads, c.head_dim, c.intermediate, c.vocab)


DRAFT_VOCAB = 2048
MAX_NEW = 16
# The engine tests' grid: plain decoding, chains, wide-shallow, EAGLE-3's default, deep-and-huge,
# and a tree verified at its root only.
SHAPES = [(1, 1, 1), (3, 1, 8), (3, 4, 8), (8, 10, 60), (12, 4, 240), (5, 10, 1)]


def eagle3_tensors(seed: int = 0, draft_vocab: int = DRAFT_VOCAB, prefix: str = "midlayer.",
                   sizes: Sizes = DEMO) -> dict:
    H, HEADS, KV, HD, INTER, VOCAB = astuple(sizes)
    g = torch.Generator().manual_seed(seed)
    w = lambda *shape: torch.randn(*shape, generator=g) * 0.05  # noqa: E731
    t = {
        "fc.weight": w(H, 3 * H),
        f"{prefix}input_layernorm.weight": torch.ones(H), f"{prefix}hidden_norm.weight": torch.ones(H),
        f"{prefix}self_attn.q_proj.weight": w(HEADS * HD, 2 * H),
        f"{prefix}self_attn.k_proj.weight": w(KV * HD, 2 * H),
        f"{prefix}self_attn.v_proj.weight": w(KV * HD, 2 * H),
        f"{prefix}self_attn.o_proj.weight": w(H, HEADS * HD),
        f"{prefix}post_attention_layernorm.weight": torch.ones(H),
        f"{prefix}mlp.gate_proj.weight": w(INTER, H), f"{prefix}mlp.up_proj.weight": w(INTER, H),
        f"{prefix}mlp.down_proj.weight": w(H, INTER),
        "norm.weight": torch.ones(H), "lm_head.weight": w(draft_vocab, H),
    }
    used = torch.sort(torch.randperm(VOCAB, generator=g)[:draft_vocab]).values  # target ids of the draft vocab
    t["d2t"] = used - torch.arange(draft_vocab)
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[used] = True
    t["t2d"] = t2d
    return {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in t.items()}


def eagle3_config(sizes: Sizes = DEMO, **changes) -> dict:
    H, HEADS, KV, HD, INTER, VOCAB = astuple(sizes)
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
              "intermediate_size": INTER, "num_attention_heads": HEADS, "num_key_value_heads": KV,
              "num_hidden_layers": 1, "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "vocab_size": VOCAB,
              "draft_vocab_size": DRAFT_VOCAB, "max_position_embeddings": 8192, "tie_word_embeddings": False}
    config.update(changes)
    return {k: v for k, v in config.items() if v is not None}


def eagle1_tensors(seed: int = 1, sizes: Sizes = DEMO) -> dict:
    H, HEADS, KV, HD, INTER, _ = astuple(sizes)
    g = torch.Generator().manual_seed(seed)
    w = lambda *shape: torch.randn(*shape, generator=g) * 0.05  # noqa: E731
    return {"fc.weight": w(H, 2 * H), "fc.bias": w(H),
            "layers.0.self_attn.q_proj.weight": w(HEADS * HD, H), "layers.0.self_attn.k_proj.weight": w(KV * HD, H),
            "layers.0.self_attn.v_proj.weight": w(KV * HD, H), "layers.0.self_attn.o_proj.weight": w(H, HEADS * HD),
            "layers.0.post_attention_layernorm.weight": torch.ones(H),
            "layers.0.mlp.gate_proj.weight": w(INTER, H), "layers.0.mlp.up_proj.weight": w(INTER, H),
            "layers.0.mlp.down_proj.weight": w(H, INTER)}


def eagle1_config(sizes: Sizes = DEMO) -> dict:  # EAGLE-1/2 heads ship a plain Llama config
    H, HEADS, KV, _, INTER, VOCAB = astuple(sizes)
    return {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": INTER,
            "num_attention_heads": HEADS, "num_key_value_heads": KV, "num_hidden_layers": 1, "rms_norm_eps": 1e-5,
            "rope_theta": 100000.0, "vocab_size": VOCAB, "bias": True}


def write(directory: Path, config: dict, tensors: dict, fmt: str = "safetensors") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in tensors.items()}, str(directory / "model.safetensors"))
    else:
        torch.save(tensors, directory / "pytorch_model.bin")
    return directory


@pytest.fixture(scope="module")
def eagle3_dir(tmp_path_factory):
    return write(tmp_path_factory.mktemp("eagle3"), eagle3_config(), eagle3_tensors())


@pytest.fixture(scope="module")
def eagle1_dir(tmp_path_factory):
    return write(tmp_path_factory.mktemp("eagle1"), eagle1_config(), eagle1_tensors())


@pytest.fixture(scope="module")
def tiny_heads(tiny_target, tmp_path_factory):
    """An EAGLE-3 and an EAGLE-1 head in the public layout at the tiny target's sizes."""
    sizes, root = sizes_of(tiny_target), tmp_path_factory.mktemp("tiny-heads")
    return {"eagle3": write(root / "eagle3", eagle3_config(sizes), eagle3_tensors(sizes=sizes)),
            "eagle1": write(root / "eagle1", eagle1_config(sizes), eagle1_tensors(sizes=sizes))}


@pytest.mark.parametrize("kind", ["eagle3", "eagle1"])
def test_public_checkpoint_is_lossless_on_the_grid(kind, tiny_target, prompt_ids, tiny_heads):
    """Every shape of the engine tests' grid, on a HumanEval and a ShareGPT prompt, 16 tokens
    each, equals plain greedy decoding: the fused features (EAGLE-3's default layers), the ids
    through d2t, the tree's attention. On the tiny target: a random head accepts ~nothing on any
    target, so each shape runs a full cycle per token, and its forwards cost a fraction of the
    demo target's."""
    from simspec.engine.modeling import aux_layer_ids

    drafter = load_drafter(str(tiny_heads[kind]), tiny_target)
    assert isinstance(drafter, EagleDrafter)
    layers = tiny_target.model.config.num_hidden_layers
    assert drafter.feature_layers == (aux_layer_ids(layers) if kind == "eagle3" else None)
    engine = SpeculativeEngine(tiny_target, drafter)
    for _, ids in prompt_ids[1:3]:  # a HumanEval and a ShareGPT prompt
        greedy = engine.greedy(ids, MAX_NEW).tokens
        for depth, width, size in SHAPES:
            out = engine.generate(ids, StaticPolicy(depth, width, size), MAX_NEW)
            divergence = compare(tiny_target, ids, out.tokens, greedy)
            assert divergence is None or divergence.near_tie, divergence.describe()
            assert all(c.draft_calls == depth - 1 for c in out.cycles)


def test_d2t_maps_draft_ids_to_target_ids(target, prompt_ids, eagle3_dir):
    """The drafter's children are target ids: draft index + d2t[index], never the raw index."""
    drafter = load_drafter(str(eagle3_dir), target)
    assert drafter.feature_layers == (2, 15, 27)  # EAGLE-3's default (2, L/2, L-3) of the 30 layers
    d2t = eagle3_tensors()["d2t"]
    _, ids = prompt_ids[0]
    prompt = torch.tensor(ids)
    cache_features = _features(target, prompt, drafter.feature_layers)
    drafter.reset(prompt[:-1], cache_features[:-1])
    drafter.commit(prompt[-1:], cache_features[-1:])
    logprobs = drafter.draft_root()
    assert logprobs.shape == (DRAFT_VOCAB,)
    _, children = drafter.top_candidates(logprobs[None], 8)
    index = torch.topk(logprobs, 8).indices
    assert children[0].tolist() == (index + d2t[index]).tolist()
    assert (d2t[index] != 0).all()  # the mapping moved every one of them: a dropped d2t would show


def _features(target, prompt, layers):
    from simspec.engine.batch_models import TargetRows

    with torch.inference_mode():
        _, features = TargetRows(target, 1, len(prompt), layers).prefill(0, prompt)
    assert features.shape == (len(prompt), 3 * H)
    return features


@pytest.mark.parametrize("variant", ["layers.0 prefix", "pytorch_model.bin", "embed_tokens included",
                                     "optional fields missing", "full vocabulary, no d2t"])
def test_layout_variants_load_to_the_same_head(variant, target, tmp_path, eagle3_dir):
    """Variants users meet in the wild load to the same drafter as the canonical layout."""
    tensors, config, fmt = eagle3_tensors(), eagle3_config(), "safetensors"
    if variant == "layers.0 prefix":
        tensors = eagle3_tensors(prefix="layers.0.")
    elif variant == "pytorch_model.bin":
        fmt = "bin"
    elif variant == "embed_tokens included":
        tensors["embed_tokens.weight"] = torch.zeros(VOCAB, H, dtype=torch.bfloat16)
    elif variant == "optional fields missing":
        config = eagle3_config(num_key_value_heads=None, rope_theta=None, rms_norm_eps=None,
                               max_position_embeddings=None)
        config["num_key_value_heads"] = KV  # GQA shape is not optional: the weights say 3
        config["rope_theta"] = 100000.0
    else:
        tensors = eagle3_tensors(draft_vocab=VOCAB)
        del tensors["d2t"], tensors["t2d"]
        config = eagle3_config(draft_vocab_size=None)
    drafter = load_drafter(str(write(tmp_path / "head", config, tensors, fmt)), target)
    if variant == "full vocabulary, no d2t":
        assert drafter.draft_vocab.tolist() == list(range(VOCAB))
        return
    reference = load_drafter(str(eagle3_dir), target)
    for name, weight in reference.head.state_dict().items():
        torch.testing.assert_close(drafter.head.state_dict()[name], weight, msg=name)
    assert drafter.draft_vocab.tolist() == reference.draft_vocab.tolist()


def _broken(case: str):
    tensors, config = eagle3_tensors(), eagle3_config()
    if case == "hidden size":
        config["hidden_size"] = 512
    elif case == "target hidden size":
        config["target_hidden_size"] = 4096
    elif case == "vocabulary":
        config["vocab_size"] = 32000
    elif case == "layer ids":
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 15, 30]}
    elif case == "missing d2t":
        del tensors["d2t"]
    elif case == "missing key":
        del tensors["midlayer.hidden_norm.weight"]
    elif case == "wrong shape":
        tensors["fc.weight"] = tensors["fc.weight"][:, :2 * H].contiguous()
    elif case == "d2t out of range":
        tensors["d2t"] = tensors["d2t"] + VOCAB
    elif case == "missing field":
        del config["num_attention_heads"]
    return config, tensors


BROKEN = {  # case -> what the one line must name
    "hidden size": "'hidden_size'", "target hidden size": "'target_hidden_size'", "vocabulary": "'vocab_size'",
    "layer ids": "'eagle_config.eagle_aux_hidden_state_layer_ids'", "missing d2t": "'d2t'",
    "missing key": "'midlayer.hidden_norm.weight'", "wrong shape": "'fc.weight'", "d2t out of range": "'d2t'",
    "missing field": "'num_attention_heads'",
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_checkpoint_that_does_not_fit_is_one_line_naming_it(case, target, tmp_path):
    config, tensors = _broken(case)
    with pytest.raises(SimspecError) as info:
        load_drafter(str(write(tmp_path / "head", config, tensors)), target)
    message = str(info.value)
    assert BROKEN[case] in message and "\n" not in message, message


def test_corrupt_weights_are_one_line(target, tmp_path):
    directory = write(tmp_path / "head", eagle3_config(), eagle3_tensors())
    (directory / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(SimspecError, match="corrupt"):
        load_drafter(str(directory), target)


def test_training_time_test_matches_the_draft_chain_at_inference(target, prompt_ids):
    """The trainer's unrolled step k at position i must be what the engine's drafter computes for
    the k-th node of a chain rooted there: same inputs (own outputs after step 0), same keys
    (the target-feature context up to the root, then the chain's own), same positions."""
    from simspec.distill.corpus import teacher_pass
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import Eagle3TrainConfig

    _, ids = prompt_ids[2]
    ids = ids[:40]
    corpus = teacher_pass(target, [ids], len(ids))
    torch.manual_seed(3)
    trainer = Eagle3Trainer(target, corpus, Eagle3TrainConfig(draft_vocab=4096, ttt_steps=3, autocast_bf16=False))
    with torch.no_grad():
        for p in trainer.model.midlayer.parameters():  # random, so the layer is not an identity
            p.add_(torch.randn_like(p) * 0.02)
        steps = {k: logits for k, logits, _, _ in trainer._unrolled(torch.tensor([0]), 3)}
    drafter = EagleDrafter(trainer.model, trainer.model.target_ids(), target, "ttt")
    # The corpus stores features in fp16; the same rounding here isolates the computation.
    features = _features(target, torch.tensor(ids), drafter.feature_layers).half().float()
    sequence = torch.tensor(ids)
    for root in (10, 25):  # the chain's root is token root + 1, read with the feature of token root
        drafter.reset(sequence[:root + 1], features[:root + 1])
        drafter.commit(sequence[root + 1:root + 2], features[root:root + 1])
        with torch.inference_mode():
            chain = [drafter.draft_root()]
            for depth in (1, 2):  # teacher-forced: the chain's next token is the text's
                token = sequence[root + 1 + depth:root + 2 + depth]
                visible = torch.ones(1, depth, dtype=torch.bool)
                chain.append(drafter.draft_level(token, depth, visible)[0])
        drafter.end_cycle()
        for k, logprobs in enumerate(chain):
            expected = torch.log_softmax(steps[k][root].float(), -1)
            torch.testing.assert_close(logprobs, expected, atol=2e-4, rtol=0, msg=f"root {root}, step {k}")


# What the servers' loaders expect (read from their sources: vLLM's
# model_executor/models/llama_eagle3.py, SGLang's srt/models/llama_eagle3.py). Both prefix every
# key but lm_head with "model.", fuse q/k/v into qkv_proj and gate/up into gate_up_proj, take
# d2t as target = draft + d2t, skip t2d. vLLM renames midlayer. to layers.0.; SGLang keeps
# midlayer. and silently skips any key it does not know, so a layers.0. head loses its layer
# there. SGLang ties lm_head to the embedding when tie_word_embeddings is true.
def server_parameters(hidden, target_hidden, heads, kv, head_dim, inter, draft_vocab, layer):
    return {
        "model.fc.weight": (hidden, 3 * target_hidden),
        f"model.{layer}.input_layernorm.weight": (hidden,), f"model.{layer}.hidden_norm.weight": (hidden,),
        f"model.{layer}.self_attn.qkv_proj.weight": ((heads + 2 * kv) * head_dim, 2 * hidden),
        f"model.{layer}.self_attn.o_proj.weight": (hidden, heads * head_dim),
        f"model.{layer}.post_attention_layernorm.weight": (hidden,),
        f"model.{layer}.mlp.gate_up_proj.weight": (2 * inter, hidden),
        f"model.{layer}.mlp.down_proj.weight": (hidden, inter),
        "model.norm.weight": (hidden,), "lm_head.weight": (draft_vocab, hidden), "d2t": (draft_vocab,),
    }


def as_server_loads(tensors: dict, server: str) -> dict:
    """The saved keys renamed as the server's load_weights renames them; stacked shards concatenated."""
    out: dict = {}
    for key, value in tensors.items():
        if key == "t2d":
            continue
        name = key if key in ("lm_head.weight", "d2t") else "model." + key
        if server == "vllm":
            name = name.replace("midlayer.", "layers.0.")
        for shard, fused in ((".q_proj", ".qkv_proj"), (".k_proj", ".qkv_proj"), (".v_proj", ".qkv_proj"),
                             (".gate_proj", ".gate_up_proj"), (".up_proj", ".gate_up_proj")):
            if shard in name:
                name = name.replace(shard, fused)
                rows, cols = out.get(name, (0, value.shape[1]))
                assert cols == value.shape[1], key
                out[name] = (rows + value.shape[0], cols)
                break
        else:
            out[name] = tuple(value.shape)
    return out


@pytest.mark.parametrize("server", ["vllm", "sglang"])
def test_trained_head_has_the_layout_servers_load(server, target, tmp_path):
    from safetensors.torch import load_file

    from simspec.engine.eagle_checkpoint import save_eagle3
    from simspec.engine.eagle_public import Eagle3Head, eagle3_for_target

    head = Eagle3Head(eagle3_for_target(target, 1024))
    used = torch.arange(1024) * 48  # target ids of the draft vocabulary
    head.d2t.copy_(used - torch.arange(1024))
    head.t2d.zero_()
    head.t2d[used] = True
    save_eagle3(tmp_path / "head", head, target, {"kind": "eagle3"})
    config = json.loads((tmp_path / "head" / "config.json").read_text())
    tensors = load_file(str(tmp_path / "head" / "model.safetensors"))
    assert "LlamaForCausalLMEagle3" in config["architectures"] and config["num_hidden_layers"] == 1
    for field in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
                  "vocab_size", "draft_vocab_size", "hidden_act", "max_position_embeddings", "rope_theta"):
        assert field in config, field
    assert config["tie_word_embeddings"] is False and not config.get("bias", False)  # fc has no bias
    assert tensors["d2t"].dtype == torch.int64 and tensors["t2d"].dtype == torch.bool
    assert tensors["t2d"].shape == (config["vocab_size"],) and int(tensors["t2d"].sum()) == config["draft_vocab_size"]
    layer = "layers.0" if server == "vllm" else "midlayer"
    expected = server_parameters(config["hidden_size"], config["target_hidden_size"], config["num_attention_heads"],
                                 config["num_key_value_heads"], config["head_dim"], config["intermediate_size"],
                                 config["draft_vocab_size"], layer)
    assert as_server_loads(tensors, server) == expected
    # d2t as the servers apply it lands on the target ids the head was trained for
    ids = torch.arange(config["draft_vocab_size"]) + tensors["d2t"]
    assert torch.equal(tensors["t2d"].nonzero().flatten(), torch.sort(ids).values)


def test_the_shipped_head_needs_its_d2t(target, prompt_ids):
    """The shipped EAGLE-3 head accepts well with its id map; read without it (what a loader
    that drops d2t does), its drafted ids are other tokens and acceptance collapses."""
    drafter = load_drafter("eagle", target)
    engine = SpeculativeEngine(target, drafter)
    _, ids = prompt_ids[0]
    kept = engine.generate(ids, StaticPolicy(5, 4, 16), 32).tau
    drafter.draft_vocab = torch.arange(len(drafter.draft_vocab))  # draft ids taken as target ids
    dropped = engine.generate(ids, StaticPolicy(5, 4, 16), 32).tau
    assert kept > 1.8 and dropped < 1.2, (kept, dropped)


def test_bf16_engine_is_lossless_within_the_dtype(prompt_ids, caplog):
    """In bf16, speculative output equals plain bf16 greedy decoding up to ties of the dtype
    (a top-2 gap within a few ulps of the logit, where the two computation orders may split).
    Loading it warns where bf16 is emulated, and only there."""
    from simspec.engine.models import _load, _say_once, native_bf16, resolve_model

    _say_once.cache_clear()  # said once per process: a bf16 load before this one in the worker would have said it
    with caplog.at_level("WARNING", logger="simspec"):  # past load_model's per-process cache: a load that logs
        target = _load.__wrapped__(resolve_model("smollm2-135m-instruct"), "cpu", torch.bfloat16)
    assert any("bf16 is emulated on this CPU" in r.getMessage() for r in caplog.records) == (not native_bf16())
    engine = SpeculativeEngine(target, load_drafter("eagle", target))
    assert engine.drafter.head.fc.weight.dtype == torch.bfloat16
    # Where bf16 is emulated (no AVX512-BF16 / AMX) each forward costs several fp32 ones: one
    # prompt there, two where the CPU multiplies bf16 natively.
    chosen, tokens = (prompt_ids[::3], 24) if native_bf16() else (prompt_ids[:1], 16)
    for _, ids in chosen:
        greedy = engine.greedy(ids, tokens).tokens
        for depth, width, size in [(5, 4, 10), (8, 10, 60)]:
            out = engine.generate(ids, StaticPolicy(depth, width, size), tokens)
            divergence = compare(target, ids, out.tokens, greedy)
            assert divergence is None or divergence.near_tie, divergence.describe()


def test_soft_labels_are_the_targets_distribution_over_the_draft_vocabulary(target, prompt_ids):
    """Step k's soft labels at position p must be the target's softmax over the draft vocabulary
    of its logits at p (the distribution its greedy label is the argmax of), not at a neighbour."""
    from simspec.distill.corpus import teacher_pass
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import Eagle3TrainConfig

    _, ids = prompt_ids[0]
    ids = ids[:40]
    corpus = teacher_pass(target, [ids], len(ids))
    trainer = Eagle3Trainer(target, corpus, Eagle3TrainConfig(draft_vocab=4096, ttt_steps=2, autocast_bf16=False))
    with torch.no_grad():
        logits = target.model(torch.tensor([ids])).logits[0].float()[:, trainer.vocab_ids]
        steps = list(trainer._unrolled(torch.tensor([0]), 2, soft=True))
    assert [k for k, *_ in steps] == [0, 1]
    for k, _, truth, probs in steps:
        expected = torch.softmax(logits[1 + k:], -1)  # step k reads positions 1 + k .. len - 1
        torch.testing.assert_close(probs, expected, atol=0.02, rtol=0, msg=f"step {k}")
        inside = truth >= 0
        assert inside.float().mean() > 0.9
        assert (probs.argmax(-1)[inside] == truth[inside]).float().mean() > 0.95


def _saved_head(target, prompt_ids, directory):
    """A small EAGLE-3 head trained one step on one prompt's teacher text and saved in
    ``directory``; returns its trainer, a second prompt's corpus and the config."""
    from simspec.distill.corpus import teacher_pass
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import Eagle3TrainConfig

    first = teacher_pass(target, [prompt_ids[0][1][:48]], 48)
    second = teacher_pass(target, [prompt_ids[2][1][:48]], 48)
    cfg = Eagle3TrainConfig(draft_vocab=1024, epochs=1, batch=1, ttt_steps=2, autocast_bf16=False)
    trainer = Eagle3Trainer(target, first, cfg)
    trainer.train(directory.parent / "run" / "checkpoint.pt")
    trainer.save(directory, {})
    return trainer, second, cfg


def test_init_continues_a_saved_head_with_its_vocabulary(target, prompt_ids, tmp_path):
    """--init: the continued run starts from the saved head's weights (as stored, fp16) and keeps
    its draft vocabulary even where the new corpus's most frequent tokens differ."""
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import Eagle3TrainConfig

    trainer, second, cfg = _saved_head(target, prompt_ids, tmp_path / "head")
    fresh = Eagle3Trainer(target, second, cfg)
    assert not torch.equal(fresh.vocab_ids, trainer.vocab_ids)  # otherwise the check below proves nothing
    continued = Eagle3Trainer(target, second, Eagle3TrainConfig(**{**cfg.__dict__, "init": str(tmp_path / "head")}))
    assert torch.equal(continued.vocab_ids, trainer.vocab_ids)
    saved = trainer.model.state_dict()
    for key, value in continued.model.state_dict().items():
        want = saved[key] if key in ("d2t", "t2d") else saved[key].half().float()
        assert torch.equal(value, want), key
    with pytest.raises(SimspecError, match="--draft-vocab 1024"):
        Eagle3Trainer(target, second, Eagle3TrainConfig(draft_vocab=512, init=str(tmp_path / "head")))


def test_init_grows_the_draft_vocabulary_keeping_what_the_head_learned(target, prompt_ids, tmp_path):
    """--init with a larger --draft-vocab: the head's tokens and every trained weight are kept,
    the new tokens (the corpus's most frequent others) start as the target's own read-out, and
    the grown head saves and loads in the public layout."""
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import Eagle3TrainConfig
    from simspec.engine.eagle_checkpoint import read_public_head
    from simspec.engine.modeling import base_and_head

    trainer, second, cfg = _saved_head(target, prompt_ids, tmp_path / "head")
    grown = Eagle3Trainer(target, second, Eagle3TrainConfig(**{**cfg.__dict__, "draft_vocab": 1536,
                                                               "init": str(tmp_path / "head")}))
    old, new = trainer.vocab_ids, grown.vocab_ids
    assert len(new) == 1536 and torch.equal(new, torch.sort(new).values)
    assert torch.isin(old, new).all()
    seen = torch.unique(second.labels[second.valid])
    assert torch.isin(seen, new).all()  # the new corpus's tokens come first among the additions
    head, saved = grown.model, trainer.model.state_dict()
    torch.testing.assert_close(head.target_ids(), new, rtol=0, atol=0)
    at = torch.searchsorted(new, old)
    torch.testing.assert_close(head.lm_head.weight[at], saved["lm_head.weight"].half().float(), rtol=0, atol=0)
    added = ~torch.isin(new, old)
    target_rows = base_and_head(target.model)[1].weight[new[added]].float()
    torch.testing.assert_close(head.lm_head.weight[added], target_rows, rtol=0, atol=0)
    for key, value in head.state_dict().items():
        if key not in ("lm_head.weight", "d2t", "t2d"):
            torch.testing.assert_close(value, saved[key].half().float(), rtol=0, atol=0, msg=key)
    assert int(head.t2d.sum()) == 1536 and bool(head.t2d[new].all())
    grown.save(tmp_path / "grown", {})
    config = json.loads((tmp_path / "grown" / "config.json").read_text())
    assert config["draft_vocab_size"] == 1536
    loaded = read_public_head(tmp_path / "grown", config, target, "grown")
    torch.testing.assert_close(loaded.target_ids(), new, rtol=0, atol=0)


def test_init_widens_the_mlp_keeping_what_the_head_computes(target, prompt_ids, tmp_path):
    """--init with a larger --intermediate-size: the head's units are kept and the new ones start
    with zero down_proj columns, so the widened head's logits equal the saved head's exactly; a
    training step then moves the new columns, and the head saves and loads at its new width."""
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import Eagle3TrainConfig
    from simspec.engine.eagle_checkpoint import read_public_head

    trainer, second, cfg = _saved_head(target, prompt_ids, tmp_path / "head")
    cfg = Eagle3TrainConfig(**{**cfg.__dict__, "init": str(tmp_path / "head")})
    kept = Eagle3Trainer(target, second, cfg).model
    wide = Eagle3Trainer(target, second, Eagle3TrainConfig(**{**cfg.__dict__, "intermediate": 2048}))
    mlp = wide.model.midlayer.mlp
    assert mlp.gate_proj.weight.shape == (2048, H) and mlp.down_proj.weight.shape == (H, 2048)
    assert float(mlp.gate_proj.weight[INTER:].detach().abs().sum()) > 0  # the new units are not dead
    g = torch.Generator().manual_seed(0)
    features = torch.randn(1, 5, 3 * H, generator=g)
    embeddings = torch.randn(1, 5, H, generator=g)
    positions = torch.arange(5)[None]
    with torch.no_grad():
        want = kept.logits(kept(kept.project(features), embeddings, positions)[0])
        got = wide.model.logits(wide.model(wide.model.project(features), embeddings, positions)[0])
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    wide.train(tmp_path / "run-wide" / "checkpoint.pt")
    assert float(mlp.down_proj.weight[:, INTER:].detach().abs().sum()) > 0
    wide.save(tmp_path / "wide", {})
    config = json.loads((tmp_path / "wide" / "config.json").read_text())
    assert config["intermediate_size"] == 2048
    loaded = read_public_head(tmp_path / "wide", config, target, "wide")
    assert loaded.cfg.intermediate == 2048
    with pytest.raises(SimspecError, match="pass 1536 or more"):
        Eagle3Trainer(target, second, Eagle3TrainConfig(**{**cfg.__dict__, "intermediate": 1024}))


def test_a_continued_run_reports_its_starting_heads_agreement_measured_alike(target, prompt_ids, tmp_path):
    """--init: the starting weights are scored before training on the run's own held-out corpus,
    and the score is kept so that a resumed run (whose weights have moved) reports the start."""
    from contextlib import nullcontext

    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.provenance import read_provenance
    from simspec.distill.run import init_agreement
    from simspec.distill.trainer import Eagle3TrainConfig

    trainer, second, cfg = _saved_head(target, prompt_ids, tmp_path / "head")
    continued = Eagle3Trainer(target, second, Eagle3TrainConfig(**{**cfg.__dict__, "init": str(tmp_path / "head")}))
    partial = tmp_path / "out.partial"
    start = init_agreement(continued, second, None, partial, lambda text: nullcontext())
    assert start == {"heldout": trainer.agreement(second), "validation": None}  # the saved head, scored alike
    continued.train(partial / "checkpoint.pt")
    assert continued.agreement(second) != start["heldout"]  # training moved it: the kept score is the start's
    assert init_agreement(continued, second, None, partial, lambda text: nullcontext()) == start
    continued.save(tmp_path / "continued", {"heldout_agreement": continued.agreement(second), "init_agreement": start})
    assert read_provenance(tmp_path / "continued").init_agreement.heldout.top1 == start["heldout"]["top1"]
