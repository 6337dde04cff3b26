"""The built-in drafter formats (``simspec.engine.formats`` is their registry); each loader is
imported when its format loads, so that registering them loads no torch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from simspec.engine.formats import SIMSPEC_EAGLE, DraftSource, config_shapes, head_shapes, register_drafter_format

if TYPE_CHECKING:
    from simspec.engine.drafter import Drafter
    from simspec.engine.models import LoadedModel


def _simspec_eagle_shapes(source: DraftSource, target_config) -> dict:
    c = source.config["config"]
    return head_shapes(c["hidden"], c["heads"], c["kv_heads"], c["intermediate"], c["draft_vocab"])


@register_drafter_format("simspec-eagle", help="a simspec drafter directory",
                         match_folder=lambda path, config: config.get("format") == SIMSPEC_EAGLE,
                         shapes=_simspec_eagle_shapes)
def _simspec_eagle(source: DraftSource, target: LoadedModel) -> Drafter:
    from simspec.engine.eagle import load_eagle

    return load_eagle(source.path, target, source.ref)


def is_speculators(config: dict) -> bool:
    """A config in the speculators format (``engine.speculators``)."""
    return isinstance(config.get("speculators_config"), dict) or "speculators_model_type" in config


def _speculators_shapes(source: DraftSource, target_config) -> dict:
    from simspec.engine.eagle_checkpoint import public_shapes
    from simspec.engine.speculators import public_fields

    return public_shapes(source.path, public_fields(source.config, f"EAGLE head {source.ref!r}"))


# Before the public layout: a speculators config also names an EAGLE architecture.
@register_drafter_format("speculators", help="an EAGLE-3 checkpoint in the speculators format (vLLM's "
                         "Eagle3Speculator)", match_folder=lambda path, config: is_speculators(config),
                         shapes=_speculators_shapes)
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
