"""The drafter-format registry: every kind of ``--draft`` reference the engine can load, with
the phrase ``--draft``'s help gives it. Importing this module loads no torch (the CLI builds its
help from it); each format's ``load`` imports what it needs.

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


DRAFTER_FORMATS: Registry[DrafterFormat] = Registry("drafter format", ("simspec.engine.formats",))


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


# --- the built-in formats ----------------------------------------------------------------------
def _simspec_eagle_shapes(source: DraftSource, target_config) -> dict:
    c = source.config["config"]
    return head_shapes(c["hidden"], c["heads"], c["kv_heads"], c["intermediate"], c["draft_vocab"])


@register_drafter_format("simspec-eagle", help="a simspec drafter directory",
                         match_folder=lambda path, config: config.get("format") == SIMSPEC_EAGLE,
                         shapes=_simspec_eagle_shapes)
def _simspec_eagle(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.eagle import load_eagle

    return load_eagle(source.path, target, source.ref)


def _is_speculators(path: Path, config: dict) -> bool:
    from simspec.engine.speculators import is_speculators

    return is_speculators(config)


def _speculators_shapes(source: DraftSource, target_config) -> dict:
    from simspec.engine.eagle_checkpoint import public_shapes
    from simspec.engine.speculators import public_fields

    return public_shapes(source.path, public_fields(source.config, f"EAGLE head {source.ref!r}"))


# Before the public layout: a speculators config also names an EAGLE architecture.
@register_drafter_format("speculators", help="an EAGLE-3 checkpoint in the speculators format (vLLM's "
                         "Eagle3Speculator)", match_folder=_is_speculators, shapes=_speculators_shapes)
def _speculators(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.speculators import load_speculators

    return load_speculators(source.path, source.config, target, source.ref)


def _is_public_eagle(path: Path, config: dict) -> bool:
    from simspec.engine.eagle_checkpoint import is_public_eagle

    return is_public_eagle(path, config)


def _public_eagle_shapes(source: DraftSource, target_config) -> dict:
    from simspec.engine.eagle_checkpoint import public_shapes

    return public_shapes(source.path, source.config)


@register_drafter_format("eagle-public", help="an EAGLE-3 or EAGLE-1/2 checkpoint directory (the public layout "
                         "SGLang and vLLM load)", match_folder=_is_public_eagle, shapes=_public_eagle_shapes)
def _public_eagle(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.eagle_checkpoint import load_public_eagle

    return load_public_eagle(source.path, source.config, target, source.ref)


def _target_layers_shapes(source: DraftSource, target_config) -> dict:
    return config_shapes(target_config, layers=int(source.ref.split(":", 1)[1]))


@register_drafter_format("target-layers", help="'target-layers:N' (the target's first N layers with its norm and "
                         "head, a zero-training stand-in)", match_ref=lambda ref: ref.startswith("target-layers:"),
                         shapes=_target_layers_shapes)
def _target_layers(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.drafter import CausalLMDrafter, truncated_target
    from simspec.errors import SimspecError

    try:
        n_layers = int(source.ref.split(":", 1)[1])
    except ValueError:
        raise SimspecError(f"bad drafter {source.ref!r}: expected target-layers:N with an integer N") from None
    return CausalLMDrafter(truncated_target(target, n_layers), source.ref)


@register_drafter_format("target", help="'target' (the target itself: everything is accepted)",
                         match_ref=lambda ref: ref == "target", shapes=lambda source, config: config_shapes(config))
def _target(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.drafter import CausalLMDrafter

    return CausalLMDrafter(target.model, "target")


def _causal_lm_shapes(source: DraftSource, target_config) -> dict:
    from simspec.engine.draft_lm import draft_vocab_size
    from simspec.engine.models import model_config

    vocab = draft_vocab_size(source.path) if source.path is not None and source.path.is_dir() else None
    return config_shapes(model_config(str(source.path or source.ref)), vocab=vocab)


@register_drafter_format("causal-lm", help="a model directory / .gguf sharing the target's tokenizer", fallback=True,
                         shapes=_causal_lm_shapes)
def _causal_lm(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.load import load_causal_lm

    return load_causal_lm(source, target)
