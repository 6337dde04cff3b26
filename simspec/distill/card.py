"""Model cards for drafters: what a drafter is, what it saw, and what it measurably does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.distill.card_request import CardRequest
from simspec.distill.provenance import DrafterProvenance, read_provenance
from simspec.engine.drafter import Drafter
from simspec.engine.models import LoadedModel
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.profiler import draft_latency, target_latency
from simspec.policies import StaticPolicy

if TYPE_CHECKING:
    from simspec.distill.run import Bar


def acceptance_by_depth(engine: SpeculativeEngine, prompts: list[list[int]], depth: int, width: int,
                        max_new_tokens: int, tick: Callable[[], object] = lambda: None) -> dict:
    """Share of cycles whose accepted length reaches k < depth, and tau, for a fixed whole tree."""
    accepted = []
    for ids in prompts:
        accepted += [c.accepted for c in engine.generate(ids, StaticPolicy(depth, width, 10**6), max_new_tokens).cycles]
        tick()
    accepted = np.array(accepted)
    return {
        "config": {"depth": depth, "width": width, "size": "whole tree"},
        "cycles": int(len(accepted)),
        "tau": float(accepted.mean() + 1),
        "reach": {str(k): float((accepted >= k).mean()) for k in range(1, depth)},
    }


@torch.inference_mode()
def greedy_agreement(engine: SpeculativeEngine, prompts: list[list[int]], max_new_tokens: int,
                     tick: Callable[[], object] = lambda: None) -> dict:
    """Top-1 / top-10 agreement of the drafter's root step with the target's greedy token, teacher-forced
    along its greedy continuation of each prompt, through the drafter interface a cycle uses."""
    from simspec.engine.batch_models import TargetRows

    drafter, device = engine.drafter, engine.device
    hits1 = hits10 = n = 0
    for ids in prompts:
        continuation = engine.greedy(ids, max_new_tokens).tokens
        sequence = torch.tensor(ids + continuation, device=device)
        _, features = TargetRows(engine.target, 1, len(sequence), drafter.target_layers()).prefill(0, sequence)
        features = features if drafter.uses_target_hidden else None
        drafter.reset(sequence[:len(ids)], None if features is None else features[:len(ids)])
        for p in range(len(continuation) - 1):
            at = len(ids) + p  # the root: continuation[p]; the truth: continuation[p + 1]
            drafter.commit(sequence[at:at + 1], None if features is None else features[at - 1:at])
            _, top = drafter.top_candidates(drafter.draft_root()[None], 10)
            drafter.end_cycle()
            truth = continuation[p + 1]
            hits1 += int(top[0, 0] == truth)
            hits10 += int(truth in top[0])
            n += 1
        tick()
    return {"top1": hits1 / max(1, n), "top10": hits10 / max(1, n), "positions": n}


def measure_card(target: LoadedModel, drafter: Drafter, n_prompts: int = 8, max_new_tokens: int = 64,
                 repeats: int = 7, bar: Bar | None = None) -> dict:
    """Held-out agreement, latency vs W (beside a 1-token target forward) and acceptance."""
    device = target.device
    widths = [1, 2, 4, 6, 8, 10]
    drafts = draft_latency(drafter, target.model.config.vocab_size, widths, [256], repeats, device)
    verify1 = target_latency(target, [1], [256], repeats)[0]
    engine = SpeculativeEngine(target, drafter)
    chosen = {src: [render_chat(target.tokenizer, p.text)
                    for p in load_prompts(src, split="heldout", n=n_prompts, max_chars=1500)]
              for src in ("humaneval", "sharegpt")}
    tick = bar("held-out prompts: agreement, chain D 8, tree D 6 W 4", 3 * sum(map(len, chosen.values()))) \
        if bar else (lambda: None)
    agreement = {src: greedy_agreement(engine, ids, max_new_tokens, tick) for src, ids in chosen.items()}
    n = sum(a["positions"] for a in agreement.values())
    agreement["all"] = {"positions": n, **{k: sum(a[k] * a["positions"] for a in agreement.values()) / max(1, n)
                                           for k in ("top1", "top10")}}
    return {
        "heldout_agreement": agreement,
        "draft_step_ms_vs_width_at_L256": {str(r.tokens): r.median * 1e3 for r in drafts},
        "target_forward_1_token_ms_at_L256": verify1.median * 1e3,
        "draft_step_W10_over_target_forward": drafts[-1].median / verify1.median,
        "acceptance": {src: {"chain_D8": acceptance_by_depth(engine, ids, 8, 1, max_new_tokens, tick),
                             "tree_D6_W4": acceptance_by_depth(engine, ids, 6, 4, max_new_tokens, tick)}
                       for src, ids in chosen.items()},
        "acceptance_prompts": {"n_per_source": n_prompts, "split": "heldout", "max_new_tokens": max_new_tokens},
    }


def write_card(directory: Path, title: str, description: str, provenance: DrafterProvenance, measured: dict) -> None:
    """README.md beside the weights: the drafter's provenance plus the measurements."""
    p, agreement = provenance, provenance.heldout_agreement
    top1, top10, positions = ((agreement.top1, agreement.top10, agreement.positions) if agreement is not None
                              else (float("nan"), float("nan"), 0))
    lines = [
        f"# {title}", "", description, "",
        "## Provenance", "",
        f"- target: `{p.target}`; simspec {p.simspec_version}",
        f"- trainable parameters: {p.parameters:,}" if p.parameters else "- trainable parameters: see config.json",
        f"- training data: {json.dumps(p.sources if p.sources is not None else {})} "
        f"(ShareGPT *train* split, Python stdlib source, the target's own greedy continuations of train prompts)"
        + (f"; part {p.part} of that text (`--part`)" if p.part else ""),
        f"- training: {json.dumps(p.train_config if p.train_config is not None else {})}, {p.steps} steps",
        f"- wall time: data {p.data_seconds or 0:.0f} s, training {p.train_seconds or 0:.0f} s on {p.machine}",
        f"- draft vocabulary: {p.draft_vocab} tokens covering "
        f"{p.draft_vocab_coverage or 0:.1%} of the target's greedy tokens in the training data",
        "",
        "## Measured", "",
        f"Held-out agreement with the target's greedy token on its own greedy text (teacher-forced, depth 1), "
        f"measured through the engine on {measured['acceptance_prompts']['n_per_source']} held-out prompts per "
        f"source ({measured['dtype']}): " + "; ".join(
            f"{src} top-1 {a['top1']:.3f}, top-10 {a['top10']:.3f} ({a['positions']} positions)"
            for src, a in measured["heldout_agreement"].items()) + ".",
        f"On the training run's held-out corpus: top-1 {top1:.3f}, top-10 {top10:.3f} over {positions} positions"
        + ("." if p.validation_agreement is None else
           f"; on its validation corpus (train prompts held apart, where its settings were chosen): top-1 "
           f"{p.validation_agreement.top1:.3f}, top-10 {p.validation_agreement.top10:.3f} over "
           f"{p.validation_agreement.positions} positions.")
        + ("" if p.init_agreement is None else
           f" The head it continued (`--init`), scored in the same run before training: top-1 "
           f"{p.init_agreement.heldout.top1:.3f} on that held-out corpus"
           + ("" if p.init_agreement.validation is None else
              f", {p.init_agreement.validation.top1:.3f} on the validation corpus") + "."),
        "",
        "Draft step latency at context 256 (median ms; top-W and host copy included), and one target forward of "
        f"1 token: {measured['target_forward_1_token_ms_at_L256']:.1f} ms.", "",
        "| W | " + " | ".join(measured["draft_step_ms_vs_width_at_L256"]) + " |",
        "| --- | " + " | ".join("---:" for _ in measured["draft_step_ms_vs_width_at_L256"]) + " |",
        "| ms | " + " | ".join(f"{v:.2f}" for v in measured["draft_step_ms_vs_width_at_L256"].values()) + " |", "",
        f"Draft step at W=10 / target forward of 1 token: {measured['draft_step_W10_over_target_forward']:.3f}.", "",
        "Accepted length on held-out prompts (share of cycles whose accepted draft length reaches k):", "",
    ]
    for src, runs in measured["acceptance"].items():
        for name, run in runs.items():
            reach = ", ".join(f"k={k}: {v:.2f}" for k, v in run["reach"].items())
            lines.append(f"- {src}, {name}: tau {run['tau']:.2f} over {run['cycles']} cycles; {reach}")
    scripts = ("`research/scripts/eagle3-drafter.sh`" if p.kind == "eagle3" else
               "`research/scripts/train-drafters.sh` and `research/scripts/drafter-cards.sh`")
    lines += ["", f"Reproduce: {scripts} (simspec's docs/drafters.md explains the recipe).", ""]
    (directory / "README.md").write_text("\n".join(lines))
    (directory / "measured.json").write_text(json.dumps(measured, indent=1))


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


EAGLE_DESCRIPTION = (
    "EAGLE-style feature drafter: [target feature ; next-token embedding] -> linear -> one Llama decoder layer "
    "with its own KV cache -> the target's LM head over a reduced draft vocabulary (ids mapped back to the "
    "target's). Only the mixer, the layer and the id map are stored; embeddings and head rows come from the "
    "target at load time.")


EAGLE3_DESCRIPTION = (
    "EAGLE-3 head in the public layout (SGLang's and vLLM's `LlamaForCausalLMEagle3`): the inputs of three "
    "target layers (low, middle, high) fused by `fc`, one decoder layer over [normed embedding ; normed feature], "
    "its own `norm` and `lm_head` over a reduced draft vocabulary, ids mapped to the target's through `d2t`; "
    "trained with training-time test. The embedding is the target's.")

EAGLE1_DESCRIPTION = (
    "EAGLE-1/2 head in the public layout: `fc` over [embedding ; target feature], one decoder layer without an "
    "input norm, the target's LM head over the full vocabulary.")


def _lm_description(config) -> str:
    return (f"Standalone draft LM: a {config.num_hidden_layers}-layer Llama, hidden {config.hidden_size}, "
            f"{config.num_attention_heads} heads ({config.num_key_value_heads} KV), sharing the target's tokenizer; "
            "tied embeddings initialised from the target's embedding projected on its principal directions, then "
            "distilled on the target's greedy tokens. A plain Hugging Face model directory; children are scored "
            "over a reduced output vocabulary (draft_vocab.safetensors).")


def make_card(request: CardRequest, bar: Bar, status) -> dict:
    """Measures the drafter and writes its card (README.md + measured.json); the ``--json`` summary."""
    from simspec.engine.load import load_pair
    from simspec.shipped import shipped_drafter

    directory = shipped_drafter(request.draft) or Path(request.draft)
    # A bad card is refused before the models load; a reference that names no folder is load_pair's to refuse.
    provenance = read_provenance(directory) if directory.is_dir() else None
    loaded, drafter = load_pair(request.target, request.draft, status=status, dtype=request.dtype)
    if provenance is None:  # the target itself, say: no folder to write the card into
        provenance = read_provenance(directory)
    shape = provenance.config.to_json() if provenance.config is not None else {}
    if hasattr(drafter, "head"):
        parameters = count_parameters(drafter.head)
        description = {"Eagle3Head": EAGLE3_DESCRIPTION, "Eagle1Head": EAGLE1_DESCRIPTION}.get(
            type(drafter.head).__name__, EAGLE_DESCRIPTION)
        if drafter.draft_vocab is not None:
            shape["draft_vocab"] = len(drafter.draft_vocab)
    else:
        parameters = count_parameters(drafter.model)
        shape["draft_vocab"] = None if drafter.draft_vocab is None else len(drafter.draft_vocab)
        description = _lm_description(drafter.model.config)
    provenance = provenance.with_(parameters=parameters, config=shape)
    measured = measure_card(loaded, drafter, request.n_prompts, request.max_new_tokens, bar=bar)
    measured["dtype"] = request.dtype
    # A second card (another dtype, another machine) goes to --out so the shipped one stays as it is.
    card_dir = Path(request.out) if request.out is not None else directory
    card_dir.mkdir(parents=True, exist_ok=True)
    write_card(card_dir, f"simspec drafter `{directory.name}` for {provenance.target}", description, provenance,
               measured)
    overall = measured["heldout_agreement"]["all"]
    return {"card": str(card_dir / "README.md"), "drafter": str(directory), "dtype": request.dtype,
            "heldout_top1": overall["top1"], "heldout_top10": overall["top10"], "positions": overall["positions"],
            "by_source": {s: a for s, a in measured["heldout_agreement"].items() if s != "all"},
            "tau": {src: {name: run["tau"] for name, run in runs.items()}
                    for src, runs in measured["acceptance"].items()}}
