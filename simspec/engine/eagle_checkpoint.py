"""Public EAGLE checkpoint folders (``config.json`` and ``model.safetensors`` or
``pytorch_model.bin``) read into ``eagle_public``'s heads, each mismatch one error line naming the
key or field; EAGLE-3 heads written in the layout SGLang and vLLM load."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from simspec.engine.eagle import EagleDrafter
from simspec.engine.eagle_public import Eagle1Head, Eagle3Head, PublicConfig
from simspec.engine.formats import PROVENANCE_FILE, head_shapes
from simspec.engine.modeling import aux_layer_ids, base_and_head
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError

EAGLE3_ARCHITECTURE = "LlamaForCausalLMEagle3"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def is_public_eagle(directory: Path, config: dict) -> bool:
    """An EAGLE-3 or EAGLE-1/2 head: so named by its architecture, or holding ``fc.weight``."""
    return any("eagle" in str(a).lower() for a in config.get("architectures") or []) \
        or "fc.weight" in _weight_names(directory)


def _weight_file(directory: Path) -> Path | None:
    return next((directory / f for f in WEIGHT_FILES if (directory / f).is_file()), None)


def _weight_names(directory: Path) -> set[str]:
    path = _weight_file(directory)
    if path is None:
        return set()
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), "pt") as f:
                return set(f.keys())
        return set(torch.load(path, map_location="cpu", weights_only=True, mmap=True))  # keys only: nothing read
    except Exception:  # unreadable: whichever loader the config leads to reports it
        return set()


def _read_weights(directory: Path, name: str) -> dict[str, torch.Tensor]:
    path = _weight_file(directory)
    if path is None:
        raise SimspecError(f"EAGLE head {name!r}: {directory} has neither {' nor '.join(WEIGHT_FILES)}")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(blob, dict):
            raise ValueError("not a state dict")
        return blob
    except Exception as exc:  # safetensors, pickle and zip errors all mean the same thing here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SimspecError(f"EAGLE head {name!r}: {path} is corrupt ({first}): restore it from its source") from None


def _field(config: dict, key: str, kind: type, where: str, default=None):
    value = config.get(key, default)
    if value is None:
        raise SimspecError(f"{where}: config field {key!r} is missing")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise SimspecError(f"{where}: config field {key!r} must be {kind.__name__}, found {value!r}")
    if kind in (int, float) and value <= 0:
        raise SimspecError(f"{where}: config field {key!r} must be positive, found {value!r}")
    return value


def aux_layers_from(config: dict, n_layers: int, where: str) -> tuple[int, ...]:
    """The fused layers: the config's ``eagle_config.eagle_aux_hidden_state_layer_ids`` (as vLLM
    reads them: the input of each listed layer) or EAGLE-3's default (2, L/2, L-3)."""
    eagle = config.get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    if ids is None:
        return aux_layer_ids(n_layers)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise SimspecError(f"{where}: config field 'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list "
                           f"of layer indices, found {ids!r}")
    bad = [i for i in ids if not 0 <= i < n_layers]
    if bad:
        raise SimspecError(f"{where}: config field 'eagle_config.eagle_aux_hidden_state_layer_ids' names layers "
                           f"{bad}, but the target has {n_layers} (0..{n_layers - 1})")
    return tuple(ids)


def checkpoint_kind(config: dict, names) -> str:
    """eagle3 or eagle1 (EAGLE-1/2), from the config's architectures and the weights' names."""
    if any(k.startswith("midlayer.") or k in ("d2t", "t2d") for k in names) \
            or any("eagle3" in str(a).lower() for a in config.get("architectures") or []):
        return "eagle3"
    return "eagle1"


def public_shapes(directory: Path, config: dict) -> dict:
    """The head's shapes (``formats.head_shapes``) from its config and weights' names; KeyError without them."""
    vocab, heads = config["vocab_size"], config["num_attention_heads"]
    eagle3 = checkpoint_kind(config, _weight_names(directory)) == "eagle3"
    return head_shapes(config["hidden_size"], heads, config.get("num_key_value_heads", heads),
                       config["intermediate_size"], config.get("draft_vocab_size", vocab) if eagle3 else vocab)


def public_config(config: dict, tensors: dict[str, torch.Tensor], target: LoadedModel, where: str) -> PublicConfig:
    tc = target.model.config
    kind = checkpoint_kind(config, tensors)
    if kind == "eagle3" and config.get("num_hidden_layers", 1) != 1:
        raise SimspecError(f"{where}: config field 'num_hidden_layers' is {config.get('num_hidden_layers')!r}: "
                           "simspec runs one-layer EAGLE-3 heads")
    hidden = _field(config, "hidden_size", int, where)
    heads = _field(config, "num_attention_heads", int, where)
    target_hidden = _field(config, "target_hidden_size", int, where, hidden)
    vocab = _field(config, "vocab_size", int, where)
    if vocab != tc.vocab_size:
        raise SimspecError(f"{where}: config field 'vocab_size' is {vocab}, but target {target.name!r} has "
                           f"{tc.vocab_size} tokens: this head was made for another target")
    if target_hidden != tc.hidden_size:
        field = "target_hidden_size" if "target_hidden_size" in config else "hidden_size"
        raise SimspecError(f"{where}: config field {field!r} is {target_hidden}, but target {target.name!r} has "
                           f"hidden size {tc.hidden_size}: this head was made for another target")
    if hidden != tc.hidden_size:  # the head reads the target's embeddings
        raise SimspecError(f"{where}: config field 'hidden_size' is {hidden}, but the target's embeddings are "
                           f"{tc.hidden_size} wide: simspec runs heads with the target's hidden size")
    rope_scaling = config.get("rope_scaling") or {}
    if not isinstance(rope_scaling, dict):
        raise SimspecError(f"{where}: config field 'rope_scaling' must be an object, found {rope_scaling!r}")
    scaling_kind = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
    if scaling_kind not in ("default", "linear", "llama3"):
        raise SimspecError(f"{where}: config field 'rope_scaling' has type {scaling_kind!r}; simspec supports "
                           "default, linear and llama3")
    return PublicConfig(
        kind=kind, hidden=hidden, target_hidden=target_hidden, heads=heads,
        kv_heads=_field(config, "num_key_value_heads", int, where, heads),
        head_dim=_field(config, "head_dim", int, where, hidden // heads),
        intermediate=_field(config, "intermediate_size", int, where),
        rms_eps=_field(config, "rms_norm_eps", float, where, 1e-6),
        rope_theta=_field(config, "rope_theta", float, where, 10000.0),
        rope_scaling=tuple(sorted(rope_scaling.items())),
        vocab=vocab,
        draft_vocab=_field(config, "draft_vocab_size", int, where, vocab) if kind == "eagle3" else vocab,
        aux_layers=aux_layers_from(config, tc.num_hidden_layers, where) if kind == "eagle3" else (),
        fc_bias="fc.bias" in tensors,
        attention_bias=bool(config.get("attention_bias", False)) or any(k.endswith("q_proj.bias") for k in tensors),
        norm_before_residual=bool(config.get("norm_before_residual", False)),
    )


def _canonical(tensors: dict[str, torch.Tensor], kind: str) -> dict[str, torch.Tensor]:
    """One key layout: EAGLE-3 checkpoints also circulate with ``layers.0.`` for ``midlayer.``, and
    some carry the target's embedding (``embed_tokens.weight``), taken from the target instead."""
    out = {}
    for key, value in tensors.items():
        key = key.removeprefix("model.")
        if key == "embed_tokens.weight":
            continue
        if kind == "eagle3" and key.startswith("layers.0."):
            key = "midlayer." + key.removeprefix("layers.0.")
        out[key] = value
    return out


def read_public_head(directory: Path, config: dict, target: LoadedModel, name: str) -> Eagle3Head | Eagle1Head:
    """A public EAGLE-3 or EAGLE-1/2 head for ``target``, in float32 on the CPU, or one error line."""
    where = f"EAGLE head {name!r} ({directory})"
    tensors = _read_weights(directory, name)
    cfg = public_config(config, tensors, target, where)
    tensors = _canonical(tensors, cfg.kind)
    head = Eagle3Head(cfg) if cfg.kind == "eagle3" else Eagle1Head(cfg)
    expected = head.state_dict()
    if cfg.kind == "eagle3":
        if "d2t" not in tensors:
            if cfg.draft_vocab < cfg.vocab:
                raise SimspecError(f"{where}: key 'd2t' is missing, and draft_vocab_size {cfg.draft_vocab} < "
                                   f"vocab_size {cfg.vocab}: without it draft ids cannot be mapped to target ids")
            tensors["d2t"] = expected["d2t"]  # the identity map: draft ids are target ids
        tensors.setdefault("t2d", expected["t2d"])  # training-only
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise SimspecError(f"{where}: key {missing[0]!r} is missing ({cfg.kind} layout)"
                           + (f", and {len(missing) - 1} more" if len(missing) > 1 else ""))
    unknown = sorted(set(tensors) - set(expected))
    if unknown:
        raise SimspecError(f"{where}: key {unknown[0]!r} is not part of the {cfg.kind} layout")
    for key, value in expected.items():
        if tuple(tensors[key].shape) != tuple(value.shape):
            raise SimspecError(f"{where}: key {key!r} has shape {list(tensors[key].shape)}, the config implies "
                               f"{list(value.shape)}")
    head.load_state_dict({k: v.to(expected[k].dtype) if k in ("d2t", "t2d") else v.float() for k, v in tensors.items()})
    if cfg.kind == "eagle3":
        ids = head.target_ids()
        if int(ids.min()) < 0 or int(ids.max()) >= cfg.vocab:
            raise SimspecError(f"{where}: key 'd2t' maps draft ids to target ids outside 0..{cfg.vocab - 1}")
    return head


def load_public_eagle(directory: Path, config: dict, target: LoadedModel, name: str) -> EagleDrafter:
    """Bind a public EAGLE-3 or EAGLE-1/2 head to ``target`` (in the target's dtype and device)."""
    head = read_public_head(directory, config, target, name)
    dtype = base_and_head(target.model)[0].get_input_embeddings().weight.dtype
    head.to(target.device, dtype)
    if isinstance(head, Eagle3Head):
        return EagleDrafter(head, head.target_ids(), target, name)
    return EagleDrafter(head.bind(base_and_head(target.model)[1]), None, target, name)


def eagle3_config(head: Eagle3Head, target: LoadedModel) -> dict:
    """config.json in the fields SGLang's and vLLM's EAGLE-3 loaders read."""
    cfg, tc = head.cfg, target.model.config
    out = {
        "architectures": [EAGLE3_ARCHITECTURE], "model_type": "llama",
        "hidden_size": cfg.hidden, "target_hidden_size": cfg.target_hidden, "intermediate_size": cfg.intermediate,
        "num_attention_heads": cfg.heads, "num_key_value_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
        "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": cfg.rms_eps, "rope_theta": cfg.rope_theta,
        "max_position_embeddings": int(getattr(tc, "max_position_embeddings", 8192)),
        "vocab_size": cfg.vocab, "draft_vocab_size": cfg.draft_vocab, "tie_word_embeddings": False,
        "attention_bias": cfg.attention_bias, "torch_dtype": "float16",
        "bos_token_id": tc.bos_token_id, "eos_token_id": tc.eos_token_id,
    }
    if cfg.rope_scaling:
        out["rope_scaling"] = dict(cfg.rope_scaling)
    if cfg.norm_before_residual:
        out["norm_before_residual"] = True
    if cfg.aux_layers != aux_layer_ids(tc.num_hidden_layers):
        # Only a non-default choice is written: readers disagree on the ids' offset (vLLM reads
        # id k as the input of layer k; SGLang as its output, capturing the input of layer k + 1),
        # and both default to the inputs of layers (2, L/2, L-3).
        out["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(cfg.aux_layers)}
    return out


def stored_tensors(head: Eagle3Head) -> dict[str, torch.Tensor]:
    """The head's tensors as the public layouts store them: fp16 weights, ``d2t`` and ``t2d`` as they are."""
    return {k: (v if k in ("d2t", "t2d") else v.to(torch.float16)).detach().cpu().contiguous()
            for k, v in head.state_dict().items()}


def save_eagle3(directory: Path, head: Eagle3Head, target: LoadedModel, card: dict) -> None:
    """The public layout (fp16 weights, ``d2t`` int64, ``t2d`` bool) plus ``simspec.json``, the card."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    save_file(stored_tensors(head), str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(eagle3_config(head, target), indent=2))
    (directory / PROVENANCE_FILE).write_text(json.dumps(card, indent=2))
