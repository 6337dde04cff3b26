"""``simspec tune``: the best static tree for a profile, in the settings of the engine a user
deploys (numpy only).

Every static (D, V) of the grid is replayed on the train prompts; the best one and the
runner-up are scored on the held-out prompts, so the speedup printed is not the one the choice
was made on. The best tree per context band is reported where it differs. At ``batch_size`` B
the profile's curves at B price every cycle (``CostModel.at_batch``).

Engine conventions (simspec counts tree levels with the root, and verified tokens with it):

- SGLang (EAGLE-2/3 dynamic trees): ``--speculative-num-steps`` = draft forward steps = D - 1,
  ``--speculative-eagle-topk`` = W, ``--speculative-num-draft-tokens`` = V (the root counts:
  at top-k 1 SGLang requires steps + 1).
- EAGLE's ``EaModel.from_pretrained``: ``top_k`` = W, ``total_token`` = V (it keeps
  total_token - 1 draft nodes plus the root), ``depth`` = D - 2 (one draft call from the root,
  then ``depth`` more, each adding a level).
- vLLM's EAGLE drafts a chain: ``num_speculative_tokens`` = D - 1. Only trees verifying a chain's
  token count (V = D) are considered for it; their acceptance is read off the recorded beam
  trees' best V nodes, which is the chain's wherever those nodes are the top-1 chain (an
  approximation the output states).

On greedy traces with child ranks, ``tune`` also builds Sequoia's tree of any shape
(``simspec.sim.tune_sequoia``) and prints it where the engine can take one, or says it cannot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.sim.evaluate import ranking, tree_surface
from simspec.sim.stream import check_rate

ENGINES = ("sglang", "vllm", "trtllm", "eagle", "json")
CHAIN_ENGINES = ("vllm", "trtllm")
BAND_EDGES = (0, 256, 512, 1024, 2048, 4096, 1 << 30)  # context bands, tokens


@dataclass(frozen=True, kw_only=True)
class TuneRequest:
    profile: str = flags.profile()
    engine: str = opt("json", "Print the tree in this engine's settings: sglang (--speculative-* flags), vllm "
                      "(speculative_config; vLLM's EAGLE drafts a chain), trtllm (the LLM API's speculative_config, "
                      "a chain; with --batch-sizes its draft_len_schedule), eagle (EaModel.from_pretrained "
                      "arguments) or json (simspec's D, W, V).")
    draft_path: str | None = opt(None, "The draft model path the printed settings name (default: the profile's "
                                 "draft).")
    max_new_tokens: int | None = flags.max_new_tokens(None, min=2)
    # sequences a server batches: every cycle's draft and verify time is shared by them
    batch_size: int = flags.batch_size()
    batch_sizes: tuple[int, ...] = flags.batch_sizes((), parse=flags.optional_sizes)
    rate: float | None = opt(None, "With --batch-sizes: tune each band's draft length for a Poisson stream at this "
                             "many requests per second, served through max(--batch-sizes) rows (goodput at "
                             "--tpot-target, then throughput, then latency), not for throughput at a fixed batch.")
    tpot_target: float = flags.tpot_target()
    duration: float = flags.duration()
    seed: int = flags.seed()

    def check(self) -> None:
        if self.engine not in ENGINES:
            raise SimspecError(f"unknown --engine {self.engine!r}: choose one of {', '.join(ENGINES)}")
        if self.batch_size < 1:
            raise SimspecError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.rate is not None and not self.batch_sizes:
            raise SimspecError("--rate tunes a draft length per batch-size band: pass --batch-sizes too, e.g. "
                               "--batch-sizes 1,2,4,8 (the largest is the server's maximum batch)")
        if self.rate is not None:
            check_rate(self.rate)  # before the per-batch tuning, which takes seconds


@dataclass(frozen=True)
class Tree:
    depth: int
    width: int
    size: int

    def settings(self, engine: str, draft: str) -> dict:
        """The engine's own names for this tree."""
        d, w, v = self.depth, self.width, self.size
        if engine == "sglang":
            return {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": draft,
                    "speculative-num-steps": d - 1, "speculative-eagle-topk": w, "speculative-num-draft-tokens": v}
        if engine == "vllm":
            return {"method": "eagle3", "model": draft, "num_speculative_tokens": d - 1}
        if engine == "trtllm":
            return {"decoding_type": "Eagle3", "speculative_model": draft, "max_draft_len": d - 1}
        if engine == "eagle":
            return {"ea_model_path": draft, "total_token": v, "depth": d - 2, "top_k": w}
        return {"depth": d, "width": w, "size": v}

    def flags(self, engine: str, draft: str) -> str:
        """The settings as one string a user pastes."""
        s = self.settings(engine, draft)
        if engine == "sglang":
            return " ".join(f"--{k} {v}" for k, v in s.items())
        if engine == "vllm":
            return f"--speculative-config '{json.dumps(s)}'"
        if engine == "trtllm":  # trtllm-serve --extra_llm_api_options FILE (YAML, of which JSON is a subset)
            return json.dumps({"speculative_config": s})
        if engine == "eagle":
            return ", ".join(f"{k}={v!r}" for k, v in s.items())
        return json.dumps(s)


@dataclass
class Tuned:
    """What ``tune`` found: the ``--json`` line and the notes to show."""

    summary: dict
    notes: list[str] = field(default_factory=list)


def band_bests(traces, cost, candidates: list[tuple[int, int]], width: int) -> list[dict]:
    """Per context band: the candidate with the best throughput, every position of the band a cycle's root."""
    out = []
    context = traces.context_length
    for lo, hi in zip(BAND_EDGES[:-1], BAND_EDGES[1:]):
        at = np.flatnonzero((context >= lo) & (context < hi))
        if len(at) < 200:  # too few positions to call a band's best
            continue
        plain, scores = cost.greedy(context[at]), []
        for depth, size in candidates:
            d, v = np.full(len(at), depth), np.full(len(at), size)
            seconds = cost.cycle(d, width, v, context[at], np.ones(len(at), dtype=np.int64))
            scores.append(float(np.sum((traces.expected_accepted(at, d, v) + 1) * plain) / np.sum(seconds)))
        best = int(np.argmax(scores))
        out.append({"context": [int(lo), int(min(hi, context.max() + 1))], "positions": int(len(at)),
                    "depth": candidates[best][0], "size": candidates[best][1], "speedup": scores[best]})
    return out


def run(request: TuneRequest) -> Tuned:
    """The best static tree on the profile's train prompts, scored on its held-out ones."""
    from simspec.policies.base import StaticPolicy
    from simspec.sim.profile import load_profile
    from simspec.sim.replay import mean_speedup, replay
    from simspec.sim.tune_sequoia import sequoia_summary

    r = request
    r.check()
    profile = load_profile(r.profile)
    cost, traces = profile.cost.at_batch(r.batch_size), profile.traces()
    splits = np.array(traces.meta.splits or [])
    train_idx, held_idx = np.flatnonzero(splits == "train"), np.flatnonzero(splits == "heldout")
    notes = []
    if len(train_idx) == 0 or len(held_idx) == 0:
        notes.append("the traces have no train/held-out split: the tree is chosen and scored on the same prompts")
        train_idx = held_idx = np.arange(traces.n_prompts)
    train, held, width = traces.subset(train_idx), traces.subset(held_idx), traces.width
    surface = tree_surface(train, cost, r.max_new_tokens, r.engine in CHAIN_ENGINES)
    if r.engine in CHAIN_ENGINES:
        notes.append(f"{r.engine} drafts a chain: trees verifying D tokens, acceptance read off the recorded "
                     f"width-{width} beam trees' best D nodes (the chain's where those are the top-1 chain)")
    ranked = ranking(surface)
    best, runner = ranked[0], ranked[1] if len(ranked) > 1 else ranked[0]
    held_best, held_runner = (replay(held, cost, StaticPolicy(d, width, v), r.max_new_tokens)
                              for d, v in (best, runner))
    tree, second = Tree(best[0], width, best[1]), Tree(runner[0], width, runner[1])
    draft = r.draft_path or str(profile.meta.draft or "DRAFT")
    if best[0] == 1:
        notes.append("plain decoding (D = 1) is fastest on this profile: serve without speculative decoding")
    if profile.kind == "analytic":
        notes.append(f"ANALYTIC profile: {profile.runtime}; not a measurement")
    elif profile.kind == "imported":
        notes.append(f"IMPORTED curves: the cycle is priced as {profile.runtime} runs it")
    bands = band_bests(traces, cost, ranked[:min(len(ranked), 24)], width)
    differing = [b for b in bands if (b["depth"], b["size"]) != best]
    summary = {
        "profile": r.profile, "kind": profile.kind, "device": profile.meta.device, "engine": r.engine,
        "runtime": profile.runtime, "temperature": profile.temperature, "batch_size": r.batch_size,
        "batch_sizes": profile.cost.batch_sizes,
        "depth": tree.depth, "width": tree.width, "size": tree.size,
        "speedup": mean_speedup(held_best), "speedup_train": mean_speedup(surface[best]),
        "speedup_q25": float(np.percentile(held_best.speedup, 25)),
        "speedup_q75": float(np.percentile(held_best.speedup, 75)),
        "runner_up": {"depth": second.depth, "width": second.width, "size": second.size,
                      "speedup": mean_speedup(held_runner), "speedup_train": mean_speedup(surface[runner])},
        "margin": mean_speedup(held_best) / mean_speedup(held_runner) - 1,
        "margin_train": mean_speedup(surface[best]) / mean_speedup(surface[runner]) - 1,
        "settings": tree.settings(r.engine, draft), "flags": tree.flags(r.engine, draft),
        "bands": bands, "bands_differ": bool(differing),
        "prompts": {"train": int(len(train_idx)), "heldout": int(len(held_idx))},
        "candidates": len(surface), "traces_hash": traces.meta.content_hash, "profile_hash": profile.meta.inputs_hash,
    }
    if r.batch_size == 1 and not traces.sampled and traces.child_rank.shape[1]:
        summary["sequoia"] = sequoia_summary(train, held, cost, traces.depth_max, r.max_new_tokens, r.engine, draft)
    elif r.batch_size == 1:
        notes.append("no Sequoia tree: it needs greedy traces with child ranks (`simspec migrate-traces` adds them)")
    if r.batch_sizes:
        notes += _per_batch(r, profile, train, held, draft, width, summary)
    return Tuned(summary, notes)


def _load_notes(load: dict) -> list[str]:
    """How the load-tuned schedule fared on the held-out stream against the throughput-tuned one."""
    from simspec.sim.load import better

    verdict = better(load["heldout"]["tuned"], load["heldout"]["throughput_tuned"])
    if load["draft_lens"] == load["throughput_tuned"]:
        return ["tuned for this load, each band keeps its throughput-tuned draft length"]
    if verdict < 0:
        return ["on the held-out stream the load-tuned schedule serves worse than the throughput-tuned one: the "
                "search fitted the train stream's noise (a longer --duration steadies it); deploy the throughput-"
                "tuned schedule"]
    return [] if verdict > 0 else ["on the held-out stream the load-tuned and throughput-tuned schedules serve "
                                   "alike (within 1 %)"]


def _per_batch(r: TuneRequest, profile, train, held, draft: str, width: int, summary: dict) -> list[str]:
    """``--batch-sizes`` (and ``--rate``): the per-batch-size settings into ``summary``; the notes."""
    from simspec.sim.tune_batches import engine_config, for_load, load_rows, per_batch

    notes = []
    summary["per_batch"] = per_batch(profile, train, held, r.batch_sizes, r.max_new_tokens)
    summary["per_batch_config"] = engine_config(r.engine, summary["per_batch"], draft, width)
    if r.rate is not None:
        summary["load"] = for_load(profile, train, held, summary["per_batch"], r.rate, r.tpot_target,
                                   r.duration, r.seed, r.max_new_tokens)
        summary["load_config"] = engine_config(r.engine, load_rows(summary["per_batch"],
                                                                   summary["load"]["draft_lens"]), draft, width)
        notes += _load_notes(summary["load"])
    if r.engine == "sglang":
        notes.append("SGLang varies only the draft steps by batch size, for chains (top-k 1, adaptive "
                     "speculation); the best tree per batch size is listed for a server run at one load")
    if r.engine == "sglang" or r.engine in CHAIN_ENGINES:  # per batch size, each engine drafts chains
        notes.append(f"chains: acceptance read off the recorded width-{width} beam trees' best D nodes")
    if r.engine == "trtllm":
        notes.append(f"TensorRT-LLM drafts nothing past the schedule's largest batch size "
                     f"({max(r.batch_sizes)}): its max-concurrency control")
    return notes
