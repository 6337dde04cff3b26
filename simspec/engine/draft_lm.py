"""A standalone draft LM: a small Llama sharing the target's tokenizer, distilled from it.

A plain Hugging Face model directory plus ``draft_vocab.safetensors``, the reduced *output*
vocabulary (target ids): children are scored over those rows of the tied embedding only (the
projection is most of a small model's step), while the input side reads every token.
``simspec.json`` records provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from simspec.engine.formats import DRAFT_VOCAB_FILE, PROVENANCE_FILE
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError


@dataclass(frozen=True)
class DraftLMShape:
    hidden: int = 256
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 704


def build_draft_lm(target: LoadedModel, shape: DraftLMShape) -> torch.nn.Module:
    """A Llama of ``shape`` with the target's vocabulary, rope and special tokens; its tied embedding
    starts as the target's projected on its top principal directions (structure, not noise)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tc = target.model.config
    if shape.hidden % shape.heads or shape.heads % shape.kv_heads:
        raise SimspecError(f"draft LM shape {shape}: hidden must divide by heads, heads by kv_heads")
    config = LlamaConfig(
        vocab_size=tc.vocab_size, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        max_position_embeddings=tc.max_position_embeddings, rms_norm_eps=tc.rms_norm_eps,
        rope_parameters=getattr(tc, "rope_parameters", None), tie_word_embeddings=True,
        bos_token_id=tc.bos_token_id, eos_token_id=tc.eos_token_id, pad_token_id=tc.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    source = target.model.get_input_embeddings().weight.detach().float()
    centred = source - source.mean(0)
    # Principal directions from the small [d_target, d_target] covariance, not an SVD of [V, d].
    _, vectors = torch.linalg.eigh(centred.T @ centred)
    projected = centred @ vectors[:, -shape.hidden:].flip(-1)
    projected *= source.std() / projected.std()
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(projected)
    model.tie_weights()
    return model


def save_draft_lm(directory: Path, model: torch.nn.Module, tokenizer, vocab_ids: torch.Tensor, meta: dict) -> None:
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(directory)
    model.float()
    tokenizer.save_pretrained(directory)
    save_file({"vocab_ids": vocab_ids.to(torch.int64).contiguous()}, str(directory / DRAFT_VOCAB_FILE))
    (directory / PROVENANCE_FILE).write_text(json.dumps(meta, indent=2))


def draft_vocab_size(directory: Path) -> int | None:
    """The size of the reduced vocabulary beside a draft LM (its header alone), or None."""
    from safetensors import safe_open

    path = directory / DRAFT_VOCAB_FILE
    if not path.exists():
        return None
    with safe_open(str(path), "pt") as f:
        return int(f.get_slice("vocab_ids").get_shape()[0])


def load_draft_vocab(directory: Path, name: str, vocab_size: int) -> torch.Tensor | None:
    """The reduced output vocabulary stored beside a draft LM, or None if it has none."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = directory / DRAFT_VOCAB_FILE
    if not path.exists():
        return None
    try:
        ids = load_file(str(path))["vocab_ids"]
    except (OSError, SafetensorError, KeyError, ValueError) as exc:
        raise SimspecError(f"drafter {name!r}: {path} is corrupt ({exc.__class__.__name__}); "
                           "retrain or delete it") from None
    if ids.ndim != 1 or len(ids) == 0 or int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise SimspecError(f"drafter {name!r}: {path} holds ids outside the target's vocabulary of {vocab_size}")
    return ids
