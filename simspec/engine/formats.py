"""The drafter-format registry: every kind of ``--draft`` reference the engine can load, with
the phrase ``--draft``'s help gives it, and the file names and shapes the formats share.
Importing this module loads no torch (the CLI builds its help from it); the built-in formats are
``simspec.engine.builtin_formats``, and each format's ``load`` imports what it needs.

A format claims a reference either by its text (``match_ref``: ``target``, ``target-layers:N``)
or, for a folder holding ``config.json``, by that config (``match_folder``: simspec's EAGLE head,
a public EAGLE checkpoint); the one ``fallback`` format (any causal LM sharing the target's
tokenizer) takes whatever no other claims. ``simspec.engine.load.load_drafter`` does the
resolving; docs/extending.md shows a new format."""

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


@dataclass(frozen=True)
class DraftSource:
    """What a ``--draft`` reference resolved to: the reference as given, its folder or file
    (None for references that name no path, e.g. ``target``), and the folder's ``config.json``
    (None where there is none)."""

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
    # The drafter's shapes from its config and the target's (a transformers config), no weights
    # read: what analytic curves need (``config_shapes``' fields). None: load it to know.
    shapes: Callable[[DraftSource, object], dict] | None = None


# The built-in formats register from their own module (it imports the loaders, which import
# this one: kept apart, no import cycle).
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


def config_shapes(config, vocab: int | None = None, layers: int | None = None) -> dict:
    """A causal LM's shapes from its transformers config, as ``simspec.sim.analytic.Architecture``
    takes them (the engine stays below the simulator: a dict, not the class); ``vocab``: a
    reduced output vocabulary, ``layers``: its first ``layers`` only."""
    heads = config.num_attention_heads
    return {"layers": layers or config.num_hidden_layers, "hidden": config.hidden_size, "heads": heads,
            "kv_heads": getattr(config, "num_key_value_heads", heads), "intermediate": config.intermediate_size,
            "vocab": vocab or config.vocab_size}


def head_shapes(hidden: int, heads: int, kv_heads: int, intermediate: int, vocab: int) -> dict:
    """An EAGLE-style head's shapes: one decoder layer over [feature ; embedding]."""
    return {"layers": 1, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "intermediate": intermediate,
            "vocab": vocab, "input_mix": 2}
