"""Methods on the real engine: each prompt runs plain decoding and every method back to back, in an
order rotated from prompt to prompt so that machine drift hits all methods alike, and the live
latencies are held against the profile's curves (drift)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from simspec.policies.base import BatchPolicy
from simspec.sim.costmodel import CostModel

if TYPE_CHECKING:  # the engine (torch) loads with the models, after a request's checks
    from simspec.engine.records import BatchRun, Generation
    from simspec.engine.speculative import SpeculativeEngine

# Operations whose live latency is compared with the profile's curve; drift past this is flagged.
DRIFT_TOLERANCE = 0.10
DRIFT_OPERATIONS = ("greedy step", "verify", "draft", "bookkeeping", "prefill")
OPERATION_CURVE = {op: "greedy" if op == "greedy step" else op for op in DRIFT_OPERATIONS}
PER_SIZE = ("verify", "bookkeeping")  # operations whose curves run along the verified size V


def _throughput_ratio(times: np.ndarray) -> float:
    """Rows of (plain s, plain tokens, method s, method tokens) -> plain time per token over the method's."""
    plain_s, plain_n, method_s, method_n = times.sum(axis=0)
    return float((plain_s / plain_n) / (method_s / method_n))


class Verdict:
    """Whether a method's outputs are lossless: equal to greedy decoding's, or split only at near-ties
    (``divergences``); at T > 0 (``sampled``) their PIT not rejected as Uniform(0, 1)."""

    @property
    def pit_p(self) -> float | None:
        """T > 0: KS p-value of the outputs' PIT against Uniform(0, 1)."""
        from simspec.engine.lossless import pit_p_value

        return pit_p_value(self.pit) if self.sampled else None

    @property
    def lossless(self) -> bool:
        from simspec.engine.lossless import PIT_ALARM

        return self.pit_p >= PIT_ALARM if self.sampled else all(d["near_tie"] for d in self.divergences)


@dataclass
class MethodRuns(Verdict):
    """One method's real runs, per prompt in prompt order (speedup: median over passes)."""

    name: str
    family: str
    by_repeat: list[list[float]] = field(default_factory=list)  # [pass][prompt] greedy time / method time
    tokens: list[int] = field(default_factory=list)  # tokens after the prefill's (the simulator's count)
    cycles: list[int] = field(default_factory=list)
    draft_calls: list[int] = field(default_factory=list)
    policy_seconds: list[float] = field(default_factory=list)  # decision time per prompt (all cycles)
    taus: list[float] = field(default_factory=list)  # accepted tokens per cycle, per prompt
    shares: list[dict[str, float]] = field(default_factory=list)
    divergences: list[dict] = field(default_factory=list)  # Divergence fields + prompt, near_tie
    pit: list[float] = field(default_factory=list)  # T > 0: every output token's PIT (all passes)
    sampled: bool = False  # T > 0: outputs are checked statistically, not against greedy
    actions: list[list[int]] = field(default_factory=list)  # (depth, size, accepted) of every cycle
    # [pass][prompt] (plain time, plain tokens, method time, method tokens): the set's throughput
    times: list[list[tuple[float, int, float, int]]] = field(default_factory=list)

    @property
    def speedup(self) -> np.ndarray:
        """Per prompt: the median over passes (greedy: the passes repeat one computation), or at T > 0 the
        mean over seeds (each pass samples other text: the speedup is a random variable)."""
        by_repeat = np.array(self.by_repeat)
        return by_repeat.mean(axis=0) if self.sampled else np.median(by_repeat, axis=0)

    @property
    def set_speedup(self) -> float:
        """Plain decoding's time per token / the method's over the whole set (the papers' throughput ratio)."""
        return _throughput_ratio(np.array(self.times, dtype=float).reshape(-1, 4))

    @property
    def set_by_repeat(self) -> list[float]:
        """``set_speedup`` of each pass alone (its pass-to-pass spread is the statistic's noise)."""
        return [_throughput_ratio(np.array(t, dtype=float)) for t in self.times]

    @property
    def paired(self) -> np.ndarray:
        """What paired tests compare: per prompt, or at T > 0 per (pass, prompt), i.e. per seed."""
        return np.array(self.by_repeat).reshape(-1) if self.sampled else self.speedup

    def add(self, rep: int, greedy: Generation, run: Generation) -> None:
        if len(self.by_repeat) <= rep:
            self.by_repeat.append([])
            self.times.append([])
        times = (greedy.total_s, len(greedy.tokens), run.total_s, len(run.tokens))
        self.times[rep].append(times)
        # Time per token, prefill included: at T > 0 plain sampling and the method emit other text
        # under the same seed, and may stop at an end token after different lengths.
        self.by_repeat[rep].append(_throughput_ratio(np.array([times], dtype=float)))
        # Greedy passes repeat the same cycles; at T > 0 every pass has its own.
        if rep == 0 or self.sampled:
            self.tokens.append(len(run.tokens) - 1)
            self.cycles.append(len(run.cycles))
            self.draft_calls.append(sum(c.draft_calls for c in run.cycles))
            self.policy_seconds.append(sum(c.policy_s for c in run.cycles))
            self.taus.append(run.tau)
            self.shares.append(run.time_shares())
            self.actions += [[c.depth, c.size, c.accepted] for c in run.cycles]


@dataclass
class RunTiming:
    """One run's live time, component by component, beside the cost model's prediction for the same cycles."""

    method: str  # "greedy" for plain greedy decoding
    prompt_length: int
    total_s: float  # prefill included; what the speedup divides
    prefill_s: float
    prefill_predicted_s: float
    measured: dict[str, np.ndarray]  # component -> per-cycle seconds
    predicted: dict[str, np.ndarray]
    cycles: dict[str, np.ndarray]  # per-cycle operating point: context, size, depth, committed, accepted
    slot: int = 0  # the slot it ran in: scored (pass, prompt) in order, or the co-timed refit's step


def unfed_tokens(depth: np.ndarray, emitted: np.ndarray) -> np.ndarray:
    """Per cycle of one sequence, the tokens its first draft level feeds: those committed since it
    last drafted (1 at the start; plain steps, depth 1, add theirs to the next draft's)."""
    fed, waiting = np.empty(len(depth), dtype=np.int64), 1
    for i, (d, e) in enumerate(zip(depth.tolist(), emitted.tolist())):
        fed[i] = waiting
        waiting = e if d > 1 else waiting + e
    return fed


class DriftMeter:
    """Live latencies against the profile's cost model, per operation (1.10: 10 % slower than calibrated)."""

    def __init__(self, cost: CostModel, width: int) -> None:
        self.cost, self.width = cost, width
        self.measured: dict[str, float] = defaultdict(float)
        self.predicted: dict[str, float] = defaultdict(float)
        # Measured and predicted seconds and cycles per key, for the in-situ refit's curves: per
        # verified size V for the operations whose curves run along V, per context for the plain step.
        self.by_key: dict[str, dict[int, list[float]]] = {op: defaultdict(lambda: [0.0, 0.0, 0])
                                                          for op in (*PER_SIZE, "greedy step")}
        self.runs: list[RunTiming] = []  # every run, component by component (the residual analysis)
        self.slot = 0  # set by the caller: the slot the next runs belong to (RunTiming.slot)

    def _add(self, operation: str, measured, predicted, key=None) -> None:
        """Sums ``operation``'s times, and per ``key`` (one per element: V or the context) into ``by_key``."""
        self.measured[operation] += float(np.sum(measured))
        self.predicted[operation] += float(np.sum(predicted))
        if key is not None:
            sums = self.by_key[operation]
            for k, m, p in zip(np.asarray(key).tolist(), np.asarray(measured, dtype=float).tolist(),
                               np.asarray(predicted, dtype=float).tolist()):
                sums[k] = [sums[k][0] + m, sums[k][1] + p, sums[k][2] + 1]

    def greedy(self, run: Generation) -> None:
        contexts = run.prompt_length + np.arange(len(run.cycles))
        steps, predicted = np.array([c.verify_s for c in run.cycles]), self.cost.greedy(contexts)
        prefill = float(self.cost.prefill(run.prompt_length))
        self.add_timing(RunTiming("greedy", run.prompt_length, run.total_s, run.prefill_s, prefill,
                                  {"greedy step": steps}, {"greedy step": np.asarray(predicted, dtype=float)},
                                  {"context": contexts}, self.slot))

    def speculative(self, run: Generation, method: str = "") -> None:
        if not run.cycles:
            return
        depth, size, accepted = (np.array([getattr(c, k) for c in run.cycles]) for k in ("depth", "size", "accepted"))
        emitted = accepted + 1
        contexts = run.prompt_length + np.concatenate([[0], np.cumsum(emitted)[:-1]])
        committed = unfed_tokens(depth, emitted)
        drafted = depth >= 2
        drafting = np.where(drafted, self.cost.draft(committed, contexts)
                            + np.maximum(depth - 2, 0) * self.cost.draft(self.width, contexts), 0.0)
        measured = {op: np.array([getattr(c, f"{op}_s") for c in run.cycles])
                    for op in ("draft", "verify", "policy", "bookkeeping")}
        # a cycle that drafts nothing is the engine's plain step: its forward is a greedy step's
        predicted = {"draft": drafting, "verify": np.where(drafted, self.cost.verify(size, contexts),
                                                           self.cost.greedy(contexts)).astype(float),
                     "bookkeeping": np.where(drafted, self.cost.bookkeeping(size, depth), 0.0).astype(float)}
        cycles = {"context": contexts, "size": size, "depth": depth, "committed": committed, "accepted": accepted}
        self.add_timing(RunTiming(method, run.prompt_length, run.total_s, run.prefill_s,
                                  float(self.cost.prefill(run.prompt_length)), measured, predicted, cycles, self.slot))

    def batch(self, run: BatchRun, plain: bool) -> None:
        """A queue decoded at B rows, plainly or speculatively, priced as replay prices it at B
        (``simspec.sim.replay.cycle_costs``), keyed by its largest tree or its longest context."""
        from simspec.sim.replay import cycle_costs

        cost = self.cost
        for c in run.batch_cycles:
            if plain or c.depth.max() == 1:  # no row drafted: the engine ran a plain step
                self._add("greedy step", [c.verify_s], [float(cost.greedy(c.context))], [c.context])
                continue
            draft, verify, book = (float(x[0]) for x in cycle_costs(cost, self.width, c.depth, c.size, np.zeros(1, int),
                                                                      np.array([c.context]), np.array([c.fed])))
            largest = [int(c.size.max())]
            self._add("verify", [c.verify_s], [verify], largest)
            self._add("bookkeeping", [c.bookkeeping_s], [book], largest)
            if c.depth.max() >= 2:
                self._add("draft", c.draft_s, draft)
        self._add("prefill", run.prefill_s, float(np.sum(cost.prefill(np.array([g.prompt_length
                                                                                  for g in run.generations])))))

    def add_timing(self, run: RunTiming) -> None:
        """Keeps a timed run and sums its operations; the prefill from plain runs only (every method pays it)."""
        self.runs.append(run)
        if run.method == "greedy":
            self._add("greedy step", run.measured["greedy step"], run.predicted["greedy step"], run.cycles["context"])
            self._add("prefill", run.prefill_s, run.prefill_predicted_s)
            return
        size, drafted = run.cycles["size"], run.cycles["depth"] >= 2
        plain = ~drafted  # the engine's plain steps inside a speculative run
        self._add("greedy step", run.measured["verify"][plain], run.predicted["verify"][plain],
                  run.cycles["context"][plain])
        self._add("verify", run.measured["verify"][drafted], run.predicted["verify"][drafted], size[drafted])
        self._add("draft", run.measured["draft"][drafted], run.predicted["draft"][drafted])
        self._add("bookkeeping", run.measured["bookkeeping"][drafted], run.predicted["bookkeeping"][drafted],
                  size[drafted])

    def ratios(self) -> dict[str, float]:
        return {op: self.measured[op] / self.predicted[op] for op in DRIFT_OPERATIONS if self.predicted.get(op)}

    def ratios_by_size(self, operation: str) -> tuple[np.ndarray, np.ndarray]:
        """The live / profile ratio of a ``PER_SIZE`` operation at each verified size seen (ascending)."""
        sums = self.by_key[operation]
        sizes = np.array(sorted(v for v in sums if sums[v][1] > 0), dtype=int)
        return sizes, np.array([sums[v][0] / sums[v][1] for v in sizes])

    def greedy_steps_by_context(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The plain steps per context (ascending): contexts, measured and predicted seconds, step counts."""
        by_context = self.by_key["greedy step"]
        contexts = np.array(sorted(by_context), dtype=int)
        sums = np.array([by_context[c] for c in contexts], dtype=float).reshape(-1, 3)
        return contexts, sums[:, 0], sums[:, 1], sums[:, 2]

    def drifted(self) -> list[str]:
        """Model-forward operations off by more than the tolerance (bookkeeping is reported, not judged)."""
        return [op for op, r in self.ratios().items() if op != "bookkeeping" and abs(r - 1) > DRIFT_TOLERANCE]


def rescaled_cost(samples: list[dict], ratios: dict[str, float]) -> CostModel:
    """The profile's cost model, each curve scaled by this run's live / profile ratio (what drift explains)."""
    from simspec.sim.profile import cost_model

    return cost_model(samples, {OPERATION_CURVE[op]: r for op, r in ratios.items()})


def load_engine(profile, texts: Sequence[str], room: int, status: Callable[[str], object], sampling=None
                ) -> tuple[SpeculativeEngine, list[list[int]]]:
    """The profile's pair on its device and runtime, and the prompts' chat-rendered ids (checked for ``room``)."""
    import torch

    from simspec.data import render_chat
    from simspec.engine.load import load_pair
    from simspec.engine.sampling import GREEDY
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.errors import SimspecError
    from simspec.fingerprint import check_fingerprint

    device = "cpu" if profile.meta.device.startswith("cpu") else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SimspecError(f"profile {profile.directory} was measured on {profile.meta.device}, and torch sees "
                           "no CUDA device here: run on that device")
    check_fingerprint(profile.traces().meta.draft_fingerprint, profile.meta.draft,
                      f"profile {profile.directory}'s traces")
    target, drafter = load_pair(profile.meta.target, profile.meta.draft, device, status, profile.dtype)
    engine = SpeculativeEngine(target, drafter, sampling or GREEDY, runtime=profile.engine_runtime)
    ids = [render_chat(target.tokenizer, text) for text in texts]
    for one in ids:
        engine.check_length(one, room)
    return engine, ids


def run_methods(engine: SpeculativeEngine, prompts: Sequence[tuple[str, list[int]]], methods: Sequence[BatchPolicy],
                max_new_tokens: int, advance: Callable[[], None] = lambda: None, repeats: int = 1,
                drift: DriftMeter | None = None, between: Callable[[list[Generation]], None] | None = None
                ) -> list[MethodRuns]:
    """Plain decoding and every method on every prompt, interleaved (at T > 0 run (pass, prompt) draws
    from seed ``seed + pass * len(prompts) + prompt``); outputs checked against greedy decoding's (a
    divergence with the target's top-2 logit gap there), or at T > 0 their PIT kept for a KS test.
    ``drift``, if given, sees every run; ``between`` runs after each prompt's, given its generations."""
    from simspec.engine.lossless import divergence_record, output_pit

    sampled = not engine.sampling.greedy
    pit_rng = np.random.default_rng(engine.sampling.seed)
    results = [MethodRuns(m.name, m.family, sampled=sampled) for m in methods]
    first_ids = prompts[0][1]  # warm-up: first calls pay for allocator growth and lazy initialisation
    engine.plain(first_ids, min(8, max_new_tokens))
    for method in methods:
        engine.generate(first_ids, method, min(8, max_new_tokens))
    for rep in range(repeats):
        for p, (prompt_id, ids) in enumerate(prompts):
            seed = engine.sampling.seed + rep * len(prompts) + p
            generations: dict[int, Generation] = {}
            for slot in np.roll(np.arange(len(methods) + 1), -(p + rep)):  # slot 0: plain decoding
                generations[slot] = (engine.plain(ids, max_new_tokens, seed) if slot == 0
                                     else engine.generate(ids, methods[slot - 1], max_new_tokens, seed))
                advance()
            greedy, runs = generations[0], [generations[i + 1] for i in range(len(methods))]
            if between is not None:
                between(runs)
            if drift is not None:
                drift.slot = rep * len(prompts) + p
                drift.greedy(greedy)
            for result, run in zip(results, runs):
                result.add(rep, greedy, run)
                if drift is not None:
                    drift.speculative(run, result.name)
                if sampled:
                    result.pit.extend(output_pit(engine.target, ids, run.tokens, engine.sampling, pit_rng).tolist())
                elif rep == 0:
                    divergence = divergence_record(engine.target, prompt_id, ids, run.tokens, greedy.tokens)
                    if divergence is not None:
                        result.divergences.append(divergence)
    return results
