"""The drafter-format registry: every kind of ``--draft`` reference the engine can load, and the
file names and shapes the formats share. Torch-free (the CLI builds its help from it); the
built-in formats are ``builtin_formats``.

A format claims a reference by its text (``match_ref``) or a folder by its ``config.json``
(``match_folder``); the one ``fallback`` format takes what no other claims
(``engine.load.load_drafter`` resolves; docs/extending.md shows a new format)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from simspec.registry import Registry

if TYPE_CHECKING:
    from simspec.engine.drafter import Drafter
    from simspec.engine.models import LoadedModel

SIMSPEC_EAGLE = "simspec-eagle-drafter"  # config.json's "format" of a simspec EAGLE-style head
PROVENANCE_FILE = "simspec.json"  # simspec's provenance beside an EAGLE-3 head or a draft LM
DRAFT_VOCAB_FILE = "draft_vocab.safetensors"  # a draft LM's reduced output vocabulary
EAGLE3_FORMAT = "simspec-drafter-card"  # simspec.json beside an EAGLE-3 head
DRAFT_LM_FORMAT = "simspec-draft-lm"  # simspec.json beside a draft LM
KIND_OF_FORMAT = {EAGLE3_FORMAT: "eagle3", DRAFT_LM_FORMAT: "lm", SIMSPEC_EAGLE: "eagle"}


@dataclass(frozen=True)
class DraftSource:
    """What a ``--draft`` reference resolved to: as given, its path and its ``config.json`` (None: none)."""

    ref: str
    path: Path | None = None
    config: dict | None = None


@dataclass(frozen=True)
class DrafterFormat:
    name: str
    help: str  # the phrase --draft's help lists
    load: Callable[[DraftSource, LoadedModel], Drafter]
    match_ref: Callable[[str], bool] | None = None  # claims a reference by its text, before any path lookup
    match_folder: Callable[[Path, dict], bool] | None = None  # claims a folder by its config.json
    fallback: bool = False  # takes what no other format claims (one format)
    # The drafter's shapes from its config and the target's, no weights read (None: load it to know)
    shapes: Callable[[DraftSource, object], dict] | None = None


# The built-in formats register from their own module (no import cycle with the loaders).
DRAFTER_FORMATS: Registry[DrafterFormat] = Registry("drafter format", ("simspec.engine.builtin_formats",))


def register_drafter_format(name: str, *, help: str, match_ref: Callable[[str], bool] | None = None,
                            match_folder: Callable[[Path, dict], bool] | None = None, fallback: bool = False,
                            shapes: Callable[[DraftSource, object], dict] | None = None):
    """Decorator: registers ``load(source, target) -> Drafter`` as the drafter format ``name``."""
    def decorate(load: Callable[[DraftSource, LoadedModel], Drafter]):
        DRAFTER_FORMATS.add(name, DrafterFormat(name, help, load, match_ref, match_folder, fallback, shapes))
        return load
    return decorate


def draft_help() -> str:
    """``--draft``'s help: the shipped drafters, then every format (the fallback last)."""
    formats = sorted(DRAFTER_FORMATS.specs(), key=lambda f: f.fallback)
    phrases = [f.help for f in formats]
    return ("Draft: 'eagle' (the shipped EAGLE-3 head), 'lm' (the shipped standalone draft LM), "
            + ", ".join(phrases[:-1]) + ", or " + phrases[-1] + ".")


def retrain_advice(directory: Path, blob: dict | None = None) -> str:
    """How to make the drafter in ``directory`` again (its kind as its provenance ``blob`` says,
    else as its files suggest)."""
    blob = blob if isinstance(blob, dict) else {}
    kind, fmt = blob.get("kind"), blob.get("format")
    if kind not in KIND_OF_FORMAT.values():
        kind = KIND_OF_FORMAT.get(fmt) if isinstance(fmt, str) else None
    if kind is None:
        kind = ("eagle" if not (directory / PROVENANCE_FILE).is_file() else
                "lm" if (directory / DRAFT_VOCAB_FILE).is_file() else "eagle3")
    return f"restore it, or train the drafter again with `simspec train-draft --kind {kind} --out {directory} --force`"


def config_shapes(config, vocab: int | None = None, layers: int | None = None) -> dict:
    """A causal LM's shapes as ``sim.analytic.Architecture`` takes them (a dict: the engine stays below
    the simulator); ``vocab``: a reduced output vocabulary, ``layers``: its first ``layers`` only."""
    heads = config.num_attention_heads
    return {"layers": layers or config.num_hidden_layers, "hidden": config.hidden_size, "heads": heads,
            "kv_heads": getattr(config, "num_key_value_heads", heads), "intermediate": config.intermediate_size,
            "vocab": vocab or config.vocab_size}


def head_shapes(hidden: int, heads: int, kv_heads: int, intermediate: int, vocab: int) -> dict:
    """An EAGLE-style head's shapes: one decoder layer over [feature ; embedding]."""
    return {"layers": 1, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "intermediate": intermediate,
            "vocab": vocab, "input_mix": 2}
