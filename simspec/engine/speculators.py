"""EAGLE-3 heads in the *speculators* format (``Eagle3Speculator``, which vLLM loads from the folder
alone): ``config.json`` holds the layer's Llama fields under ``transformer_layer_config``, the
head's own fields at the top and the serving defaults under ``speculators_config``; the weights
name the layer ``layers.0.*`` and carry ``embed_tokens``. Read into, and written from, the public
EAGLE-3 head; options simspec's head lacks (extra norms, a Qwen3 layer) are one error line."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from simspec.engine.eagle import EagleDrafter
from simspec.engine.eagle_checkpoint import EAGLE3_ARCHITECTURE, eagle3_config, load_public_eagle, stored_tensors
from simspec.engine.eagle_public import Eagle3Head
from simspec.engine.formats import PROVENANCE_FILE
from simspec.engine.modeling import base_and_head
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError

ARCHITECTURE = "Eagle3Speculator"
FORMAT_VERSION = "0.1.0"  # the speculators release whose config layout this writes
UNSUPPORTED = ("norm_before_fc", "fc_norm", "norm_output")  # norms around fc that simspec's head lacks
HEAD_FIELDS = ("draft_vocab_size", "target_hidden_size", "norm_before_residual")


def public_fields(config: dict, where: str) -> dict:
    """The config the public EAGLE-3 reader takes, from a speculators one."""
    kind = config.get("speculators_model_type")
    if kind != "eagle3":
        raise SimspecError(f"{where}: config field 'speculators_model_type' is {kind!r}: simspec reads eagle3 "
                           "speculators")
    layer = config.get("transformer_layer_config")
    if not isinstance(layer, dict):
        raise SimspecError(f"{where}: config field 'transformer_layer_config' must be an object (the decoder layer's "
                           f"fields), found {layer!r}")
    if layer.get("model_type", "llama") != "llama":
        raise SimspecError(f"{where}: 'transformer_layer_config.model_type' is {layer.get('model_type')!r}: simspec "
                           "runs Llama decoder layers")
    for name in UNSUPPORTED:
        if config.get(name):
            raise SimspecError(f"{where}: config field {name!r} is set: simspec's EAGLE-3 head has no such norm")
    fields = {**layer, "architectures": [EAGLE3_ARCHITECTURE]}
    fields.update({k: config[k] for k in HEAD_FIELDS if config.get(k) is not None})
    if config.get("eagle_aux_hidden_state_layer_ids") is not None:
        fields["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": config["eagle_aux_hidden_state_layer_ids"]}
    return fields


def load_speculators(directory: Path, config: dict, target: LoadedModel, name: str) -> EagleDrafter:
    return load_public_eagle(directory, public_fields(config, f"EAGLE head {name!r} ({directory})"), target, name)


def speculators_config(head: Eagle3Head, target: LoadedModel, verifier: str, speculative_tokens: int) -> dict:
    public = eagle3_config(head, target)
    layer = {k: v for k, v in public.items() if k not in (*HEAD_FIELDS, "architectures", "eagle_config", "torch_dtype")}
    out = {"architectures": [ARCHITECTURE], "speculators_model_type": "eagle3", "speculators_version": FORMAT_VERSION,
           "transformer_layer_config": layer, "draft_vocab_size": head.cfg.draft_vocab,
           "target_hidden_size": head.cfg.target_hidden, "norm_before_residual": head.cfg.norm_before_residual,
           "torch_dtype": "float16",
           "speculators_config": {
               "algorithm": "eagle3", "default_proposal_method": "greedy",
               "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": speculative_tokens,
                                     "verifier_accept_k": 1, "accept_tolerance": 0.0}],
               "verifier": {"name_or_path": verifier,
                            "architectures": list(getattr(target.model.config, "architectures", None) or [])}}}
    if "eagle_config" in public:
        out["eagle_aux_hidden_state_layer_ids"] = public["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    return out


def save_speculators(directory: Path, head: Eagle3Head, target: LoadedModel, card: dict, verifier: str,
                     speculative_tokens: int = 3) -> None:
    """``head`` in the speculators layout (fp16 weights, ``d2t`` int64, ``t2d`` bool, the target's
    embedding as the draft's), plus ``simspec.json``, simspec's provenance card."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    tensors = {("layers.0." + k.removeprefix("midlayer.") if k.startswith("midlayer.") else k): v
               for k, v in stored_tensors(head).items()}
    embedding = base_and_head(target.model)[0].get_input_embeddings().weight
    tensors["embed_tokens.weight"] = embedding.detach().to("cpu", torch.float16).contiguous()
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(speculators_config(head, target, verifier, speculative_tokens),
                                                      indent=2))
    (directory / PROVENANCE_FILE).write_text(json.dumps(card, indent=2))
