"""Replay under load (numpy only): a request stream (``simspec.sim.stream``) served by continuous
batching through at most ``max_batch`` rows, speculatively with a policy or plainly, by the
engine's rules (``simspec.sim.queues``: a request joins a free row at a cycle boundary once it
has arrived, is prefilled alone, and leaves when done).

A cycle runs at the smallest batch size the profile measured that holds its busy rows, as a
CUDA-graph server pads to a captured size, and is priced by the curves there
(``CostModel.at_batch``). Before every cycle the policy is told that batch size and how many
requests are waiting (``BatchPolicy.batch_size``, ``waiting``), so a load-aware rule can switch
speculation down as the batch fills.

Per request: time to first token (arrival to the end of its prefill, queueing included), time
per output token after the first, end-to-end latency. Over the stream: throughput (output
tokens per second from the first arrival to the last token) and goodput at a latency target
(requests per second that met it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.policies.base import BatchPolicy
from simspec.policies.registry import baselines_help, default_baselines
from simspec.sim.charge import DecisionCharge, as_charge
from simspec.sim.costmodel import CostModel
from simspec.sim.evaluate import methods_flag
from simspec.sim.queues import run_queues
from simspec.sim.replay import Cycles, positions_limit
from simspec.sim.stream import Stream
from simspec.sim.traces import TraceSet


@dataclass(frozen=True)
class LoadResult:
    method: str
    arrival: np.ndarray  # [requests] seconds
    first_token: np.ndarray  # [requests] seconds, its prefill done
    finished: np.ndarray  # [requests] seconds, its last token out
    tokens: np.ndarray  # [requests] output tokens, the first included
    cycles: int
    max_batch: int

    @property
    def ttft(self) -> np.ndarray:
        return self.first_token - self.arrival

    @property
    def e2e(self) -> np.ndarray:
        return self.finished - self.arrival

    @property
    def tpot(self) -> np.ndarray:
        """Seconds per output token after the first (a one-token request: 0)."""
        return (self.finished - self.first_token) / np.maximum(self.tokens - 1, 1)

    @property
    def span(self) -> float:
        return float(self.finished.max() - self.arrival.min())

    @property
    def throughput(self) -> float:
        """Output tokens per second over the stream."""
        return float(self.tokens.sum() / self.span)

    def goodput(self, tpot_s: float, ttft_s: float | None = None) -> float:
        """Requests per second that met the targets: time per output token <= ``tpot_s`` (and
        time to first token <= ``ttft_s``, if given)."""
        met = self.tpot <= tpot_s
        if ttft_s is not None:
            met &= self.ttft <= ttft_s
        return float(met.sum() / self.span)

    def summary(self, tpot_s: float | None = None, ttft_s: float | None = None) -> dict:
        p = {q: float(x) for q, x in zip((50, 90), np.percentile(self.tpot, [50, 90]))}
        row = {"method": self.method, "requests": len(self.arrival), "throughput_tokens_per_s": self.throughput,
               "tpot_p50_s": p[50], "tpot_p90_s": p[90], "ttft_p50_s": float(np.median(self.ttft)),
               "ttft_p90_s": float(np.percentile(self.ttft, 90)), "e2e_p50_s": float(np.median(self.e2e)),
               "cycles": self.cycles}
        if tpot_s is not None:
            row["goodput_requests_per_s"] = self.goodput(tpot_s, ttft_s)
        return row


def replay_load(traces: TraceSet, cost: CostModel, policy: BatchPolicy | None, stream: Stream, max_batch: int,
                max_new_tokens: int | None = None, decision_seconds: float | DecisionCharge = 0.0,
                seed: int = 0, padded: bool = False) -> LoadResult:
    """Serve ``stream`` with ``policy`` (None: plain decoding) through at most ``max_batch`` rows;
    ``cost`` is the profile's batch-1 model. On traces recorded at T > 0, ``seed`` draws each
    cycle's acceptance (one draw: the latencies are the stream's, not an average). ``padded``:
    every cycle at ``max_batch`` rows, as simspec's engine runs them (its forwards pad to every
    row), not at the busy rows' bucket."""
    cost.at_batch(max_batch)  # a maximum batch the profile has no curves for: one line
    sizes = np.array([max_batch] if padded else [b for b in cost.batch_sizes if b <= max_batch])
    slots = np.asarray(stream.prompt)
    limit = positions_limit(traces, max_new_tokens)[slots]
    if stream.output_tokens is not None:
        limit = np.minimum(limit, np.asarray(stream.output_tokens) - 1)
    rng = np.random.default_rng(seed) if traces.sampled else None
    cycles = Cycles(traces, policy, as_charge(decision_seconds), slots, limit, len(slots), rng)
    step = cycles.plain_step if policy is None else cycles.step

    def at_load(busy: np.ndarray, position: np.ndarray, first: np.ndarray, waiting: np.ndarray):
        batch = int(sizes[np.searchsorted(sizes, len(busy))])
        if policy is not None:
            policy.batch_size, policy.waiting = batch, int(waiting.sum())
        return step(cost.at_batch(batch), busy, position, first)

    run = run_queues(len(slots), max_batch, limit, cost.prefill(traces.prompt_lengths[slots]), at_load,
                     np.asarray(stream.arrival, dtype=float))
    return LoadResult("plain" if policy is None else policy.name, np.asarray(stream.arrival, dtype=float),
                      run.first_token, run.finished, limit + 1, int(run.cycles.sum()), max_batch)


def _rates(text: str, flag: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SimspecError(f"{flag} takes comma-separated requests per second, got {text!r}") from None
    for rate in rates or (0.0,):
        if not rate > 0:
            raise SimspecError(f"{flag}: a rate must be a positive number of requests per second, not {rate:g}")
    return rates


def _bursts(text: str, flag: str) -> tuple[float, ...]:
    try:
        on_off = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        on_off = ()
    if text.strip() and (len(on_off) != 2 or on_off[0] <= 0 or on_off[1] < 0):
        raise SimspecError(f"{flag} takes ON,OFF seconds (ON > 0, OFF >= 0), e.g. 10,30; got {text!r}")
    return on_off


@dataclass(frozen=True, kw_only=True)
class LoadRequest:
    profile: str = flags.profile()
    rates: tuple[float, ...] = opt((0.05, 0.3, 1.0), "Request rates to serve, requests per second, comma-separated.",
                                   parse=_rates)
    max_batch: int = opt(4, "The most requests decoded together (rows); the profile needs curves at this batch size "
                         "(`calibrate --batch-sizes`).", min=1)
    duration: float = opt(600.0, "Seconds of arrivals at each rate.", min=1.0)
    bursts: tuple[float, ...] = opt((), "ON,OFF: arrivals at the rate for ON seconds, then none for OFF seconds "
                                    "(unset: Poisson arrivals).", parse=_bursts)
    stream: str | None = opt(None, "A request file instead of --rates: CSV with a header or JSON lines, each request "
                             "with arrival_s, prompt_id (a trace prompt's id) and output_tokens.")
    baselines: tuple[str, ...] = opt(factory=default_baselines, help=baselines_help, parse=methods_flag)
    tpot_target: float = opt(0.1, "Goodput's latency target: seconds per output token a request must not exceed.",
                             min=0.0)
    split: str = flags.split()
    max_new_tokens: int | None = flags.max_new_tokens(None)
    seed: int = flags.seed()
    temperature: float | None = flags.temperature(None)
    real: bool = opt(False, "Also serve every stream on the real engine, in real time (each takes about --duration "
                     "seconds per method), beside the replay that predicts it, priced as this engine runs: every "
                     "cycle at --max-batch rows. Outputs are checked against plain greedy decoding's.")


def run(request: LoadRequest, status) -> dict:
    """Every method (plain decoding first) under every stream: one row each, and per stream the
    best method and whether speculation pays there (the best speculative method's goodput,
    then throughput, against plain decoding's)."""
    from simspec.sim.evaluate import build_baselines, check_split, decision_charges, split_traces
    from simspec.sim.profile import load_profile
    from simspec.sim.stream import bursty, poisson, read_stream

    r = request
    profile = load_profile(r.profile)
    profile.require_temperature(r.temperature)
    profile.cost.at_batch(r.max_batch)
    traces = profile.traces()
    scored = split_traces(traces, check_split(r.split))
    everyone = np.arange(scored.n_prompts)
    if r.stream:
        streams = [read_stream(r.stream, list(scored.meta.prompt_ids))]
    elif r.bursts:
        streams = [bursty(rate, *r.bursts, r.duration, everyone, r.seed) for rate in r.rates]
    else:
        streams = [poisson(rate, r.duration, everyone, r.seed) for rate in r.rates]
    with status("tuning the baselines on the train split"):
        methods = [None, *build_baselines(list(r.baselines), split_traces(traces, "train"), profile.cost,
                                          r.max_new_tokens)]
    charged = decision_charges(profile.meta)
    tokens = r.max_new_tokens or (flags.REAL_TOKENS if r.real else None)
    real = iter(_serve_real(profile, scored, streams, methods, r, tokens, status) if r.real else ())
    rows, verdicts = [], []
    for stream in streams:
        with status(f"replaying {len(stream.arrival)} requests with {len(methods)} methods ({stream.meta['kind']}"
                    + (f", {stream.meta['rate']:g}/s)" if "rate" in stream.meta else ")")):
            served = [replay_load(scored, profile.cost, m, stream, r.max_batch, tokens,
                                  charged.get(m.family, DecisionCharge.flat(0.0)) if m else 0.0, r.seed, r.real)
                      for m in methods]
        these = [_beside({**s.summary(r.tpot_target), "stream": stream.meta}, next(real, None), r.tpot_target)
                 for s in served]
        rows += these

        def score(row: dict) -> tuple[float, float]:
            return row["goodput_requests_per_s"], row["throughput_tokens_per_s"]

        best = max(these[1:], key=score, default=these[0])
        verdict = {"stream": stream.meta, "best": max(these, key=score)["method"], "best_speculative": best["method"],
                   "speculation_pays": score(best) > score(these[0])}
        if r.real:
            measured = [row["real"] for row in these]
            verdict["speculation_pays_real"] = score(max(measured[1:], key=score, default=measured[0])) > score(
                measured[0])
        verdicts.append(verdict)
    return {"profile": r.profile, "device": profile.meta.device, "kind": profile.kind, "max_batch": r.max_batch,
            "tpot_target_s": r.tpot_target, "split": r.split, "max_new_tokens": tokens, "seed": r.seed,
            "temperature": traces.temperature, "real": r.real, "rows": rows, "verdicts": verdicts}


def _serve_real(profile, scored, streams, methods, r: LoadRequest, tokens: int, status) -> list:
    from simspec.measure.load_real import serve_real
    from simspec.sim.profile import load_live_profile

    return serve_real(load_live_profile(r.profile, "load --real"), scored, streams, methods, r.max_batch, tokens,
                      status)


COMPARED = ("throughput_tokens_per_s", "tpot_p50_s", "tpot_p90_s", "ttft_p50_s")


def _beside(row: dict, real, tpot_s: float) -> dict:
    """``row`` (the replay's) with the real run's metrics and the replay's relative error on
    each of ``COMPARED``, where there is a real run."""
    if real is None:
        return row
    result, lossless = real
    measured = result.summary(tpot_s)
    return {**row, "real": measured, "lossless": lossless,
            "rel_error": {k: row[k] / measured[k] - 1 if measured[k] else None for k in COMPARED}}
