"""Resolving a ``--draft`` reference to a loaded drafter: the target itself, a truncated target,
a shipped drafter by name, a simspec EAGLE-style head, a public EAGLE-3 or EAGLE-1/2 checkpoint,
or any causal LM sharing the target's tokenizer."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Callable

from simspec.engine.draft_lm import PROVENANCE_FILE, load_draft_vocab
from simspec.engine.drafter import CausalLMDrafter, Drafter, truncated_target
from simspec.engine.eagle import FORMAT, load_eagle
from simspec.engine.eagle_public import is_public_eagle, load_public_eagle
from simspec.engine.models import BUILTIN_MODELS, LoadedModel, check_same_vocabulary, dtype_name, load_model
from simspec.errors import SimspecError, read_json
from simspec.shipped import SHIPPED_DRAFTERS, shipped_drafter


def load_drafter(ref: str, target: LoadedModel) -> Drafter:
    """``target`` (the target itself), ``target-layers:N``, a shipped drafter name (``eagle``),
    a simspec drafter directory, or any causal LM reference sharing the target's tokenizer."""
    if ref == "target":
        return CausalLMDrafter(target.model, "target")
    if ref.startswith("target-layers:"):
        try:
            n_layers = int(ref.split(":", 1)[1])
        except ValueError:
            raise SimspecError(f"bad drafter {ref!r}: expected target-layers:N with an integer N") from None
        return CausalLMDrafter(truncated_target(target, n_layers), ref)
    path = shipped_drafter(ref) or Path(ref)
    if not path.exists() and ref not in BUILTIN_MODELS:
        raise SimspecError(f"unknown drafter {ref!r}: no such folder. Give a shipped drafter "
                           f"({', '.join(SHIPPED_DRAFTERS)}), target, target-layers:N, a drafter folder (simspec's, "
                           "or a public EAGLE-3 / EAGLE-1/2 checkpoint), or a Hugging Face model directory or .gguf "
                           "sharing the target's tokenizer")
    config_file = path / "config.json"
    if config_file.is_file():
        kind = "lm" if (path / PROVENANCE_FILE).is_file() else "eagle"
        fix = f"restore it, or train the drafter again with `simspec train-draft --kind {kind} --out {path} --force`"
        config = read_json(config_file, f"drafter {ref!r}: ", f"drafter {ref!r}: {config_file} is missing", fix)
        if config.get("format") == FORMAT:
            return load_eagle(path, target, ref)
        if is_public_eagle(path, config):
            return load_public_eagle(path, config, target, ref)
        rows = config.get("vocab_size")  # refuse a foreign vocabulary before loading any weights
        if isinstance(rows, int):
            check_same_vocabulary(target, None, ref, rows)
        if (path / PROVENANCE_FILE).is_file():  # a simspec draft LM: its provenance is read by its model card
            read_json(path / PROVENANCE_FILE, f"drafter {ref!r}: ", "", fix)
    draft = load_model(str(path), device=str(target.device), dtype=dtype_name(target.model.dtype))
    check_same_vocabulary(target, draft.tokenizer, ref, draft.model.get_output_embeddings().weight.shape[0])
    vocab = load_draft_vocab(path, ref, target.model.config.vocab_size) if path.is_dir() else None
    return CausalLMDrafter(draft.model, ref, vocab)


def load_pair(target: str, draft: str, device: str = "cpu", status: Callable[[str], object] = nullcontext,
              dtype: str = "fp32") -> tuple[LoadedModel, Drafter]:
    """The target and its drafter in ``dtype``, loaded inside ``status`` (a progress step without a count)."""
    with status(f"loading {target} and draft {draft} ({dtype})"):
        loaded = load_model(target, device=device, dtype=dtype)
        return loaded, load_drafter(draft, loaded)
