"""Resolving a ``--draft`` reference to a loaded drafter through the format registry
(``simspec.engine.formats``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from simspec.engine.draft_lm import load_draft_vocab
from simspec.engine.drafter import CausalLMDrafter, Drafter
from simspec.engine.formats import DRAFTER_FORMATS, PROVENANCE_FILE, DrafterFormat, DraftSource, retrain_advice
from simspec.engine.models import BUILTIN_MODELS, LoadedModel, check_same_vocabulary, dtype_name, load_model
from simspec.errors import SimspecError, read_json
from simspec.shipped import SHIPPED_DRAFTERS, shipped_drafter


def load_drafter(ref: str, target: LoadedModel) -> Drafter:
    """``target`` (the target itself), ``target-layers:N``, a shipped drafter name (``eagle``),
    a simspec drafter directory, or any causal LM reference sharing the target's tokenizer."""
    fmt, source = resolve_drafter(ref)
    return fmt.load(source, target)


def resolve_drafter(ref: str) -> tuple[DrafterFormat, DraftSource]:
    """The format that claims ``ref``, and what ``ref`` resolved to; no weights read."""
    formats = list(DRAFTER_FORMATS.specs())
    for fmt in formats:
        if fmt.match_ref is not None and fmt.match_ref(ref):
            return fmt, DraftSource(ref)
    path = shipped_drafter(ref) or Path(ref)
    if not path.exists() and ref not in BUILTIN_MODELS:
        raise SimspecError(f"unknown drafter {ref!r}: no such folder. Give a shipped drafter "
                           f"({', '.join(SHIPPED_DRAFTERS)}), target, target-layers:N, a drafter folder (simspec's, "
                           "or a public EAGLE-3 / EAGLE-1/2 checkpoint), or a Hugging Face model directory or .gguf "
                           "sharing the target's tokenizer")
    config_file = path / "config.json"
    config = None
    if config_file.is_file():
        config = read_json(config_file, f"drafter {ref!r}: ", f"drafter {ref!r}: {config_file} is missing",
                           retrain_advice(path))
        for fmt in formats:
            if fmt.match_folder is not None and fmt.match_folder(path, config):
                return fmt, DraftSource(ref, path, config)
    [fallback] = [fmt for fmt in formats if fmt.fallback]
    return fallback, DraftSource(ref, path, config)


def load_causal_lm(source: DraftSource, target: LoadedModel) -> CausalLMDrafter:
    """Any causal LM sharing the target's tokenizer (a simspec draft LM with its reduced vocabulary
    too), refused before its weights load when its config names another vocabulary size."""
    ref, path = source.ref, source.path
    if source.config is not None:
        rows = source.config.get("vocab_size")
        if isinstance(rows, int):
            check_same_vocabulary(target, None, ref, rows)
        if (path / PROVENANCE_FILE).is_file():  # a simspec draft LM: its provenance is read by its model card
            read_json(path / PROVENANCE_FILE, f"drafter {ref!r}: ", "", retrain_advice(path))
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
