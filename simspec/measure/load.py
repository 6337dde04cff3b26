"""``simspec load``: request streams served with plain decoding and every baseline, in the simulator
and, with ``--live``, by the real engine in real time beside the replay that predicts it (priced
at ``max_batch`` rows, since the engine pads every forward to them; greedy outputs checked)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simspec import __version__, flags
from simspec.cluster import check_ray
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.policies.registry import baselines_help, default_baselines
from simspec.sim.charge import DecisionCharge
from simspec.sim.evaluate import methods_flag
from simspec.sim.load import LoadResult, best_row, better, replay_load


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
    duration: float = flags.duration()
    bursts: tuple[float, ...] = opt((), "ON,OFF: arrivals at the rate for ON seconds, then none for OFF seconds "
                                    "(unset: Poisson arrivals).", parse=_bursts)
    stream: str | None = opt(None, "A request file instead of --rates: CSV with a header or JSON lines, each request "
                             "with arrival_s, prompt_id (a trace prompt's id) and output_tokens.")
    baselines: tuple[str, ...] = opt(factory=default_baselines, help=baselines_help, parse=methods_flag)
    tpot_target: float = flags.tpot_target()
    split: str = flags.split()
    max_new_tokens: int | None = flags.max_new_tokens(None)
    seed: int = flags.seed()
    temperature: float | None = flags.temperature(None)
    live: bool = opt(False, "Also serve every stream on the live engine, in real time (each takes about --duration "
                     "seconds per method), beside the replay that predicts it, priced as this engine runs: every "
                     "cycle at --max-batch rows. Outputs are checked against plain greedy decoding's.")
    recalibrate: bool = flags.recalibrate()
    recalibrate_prompts: int = flags.recalibrate_prompts()
    refit_ladder: str = flags.refit_ladder()
    refit_each_stream: bool = opt(False, "With --live --recalibrate: refit again right before every live stream (each "
                                  "rate and method: the same train prompts and ladder) and price that stream's replay "
                                  "by its own refit, so that slow drift between streams stays out of the error (a "
                                  "machine whose speed moves minute to minute gains nothing: docs/simulator.md); each "
                                  "row also keeps its error under the first refit. A ladder of the trees served "
                                  "(--refit-ladder 4:8) keeps each refit short.")
    surface: tuple[int, ...] = opt((), "Tree sizes V for a throughput surface over (rate, V), e.g. 2,4,8,16,32: "
                                   "a static tree of each size, at its best depth on the train split, serves every "
                                   "stream (simulated).", parse=flags.ints)
    sweep: tuple[str, ...] = opt((), "More profiles, comma-separated, to serve the same streams with the same "
                                 "methods (e.g. the analytic A100, H100 and H200 beside a measured profile): each "
                                 "(profile, rate) is a load run of its own, and each profile gets its tables. "
                                 "Simulated only.", parse=flags.names)
    ray: str | None = flags.ray()
    workers: int = flags.workers(2)
    out: str | None = flags.out()
    force: bool = flags.force()

    def __post_init__(self):
        from simspec.measure.insitu import check_refit_flags, ladder_points

        ladder_points(self.refit_ladder)
        check_refit_flags(self)
        if self.live and (self.sweep or self.ray is not None):
            raise SimspecError("--sweep and --ray serve simulated streams: the live engine serves one profile in real "
                               "time on this machine (drop --live, or --sweep/--ray)")
        check_ray(self)
        if self.recalibrate and not self.live:
            raise SimspecError("--recalibrate refits the profile on the live engine before its runs: pass --live too")
        if self.refit_each_stream and not self.recalibrate:
            raise SimspecError("--refit-each-stream refits the profile before every live stream: pass --live "
                               "--recalibrate too")
        if any(v < 2 for v in self.surface):
            raise SimspecError(f"--surface takes tree sizes V >= 2 (V = 1 is plain decoding, always served), got "
                               f"{','.join(map(str, self.surface))}")


def run(request: LoadRequest, bar, status) -> dict:
    """Every method (plain decoding first) under every stream: one row each, and per stream the best
    method and whether speculation pays there (``sim.load.better``); with ``--surface``, static
    trees of each size too; with ``--out``, the summary and its figure written to a new folder.
    (``--sweep`` and ``--ray``: ``simspec.measure.load_sweep.serve``.)"""
    from simspec.cache import check_out
    from simspec.machine import machine
    from simspec.sim.evaluate import build_baselines, check_split, decision_charges, split_traces
    from simspec.sim.profile import load_profile
    from simspec.sim.stream import bursty, poisson, read_stream

    r = request
    if r.out:
        check_out(r.out, r.force)
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
    tokens = r.max_new_tokens or (flags.REAL_TOKENS if r.live else None)
    live = _live(r, scored, split_traces(traces, "train"), tokens, bar, status) if r.live else None
    cost = profile.cost if live is None or live.cost is None else live.cost  # --recalibrate: the refit prices
    with status("tuning the baselines on the train split"):
        methods = [None, *build_baselines(list(r.baselines), split_traces(traces, "train"), cost, r.max_new_tokens)]
    charged = decision_charges(profile.meta)
    trees = _surface_trees(r.surface, split_traces(traces, "train"), cost, r.max_new_tokens, status)
    real = iter(serve_real(live, streams, methods, tokens, status) if live else ())
    each = live is not None and live.again is not None  # --refit-each-stream: every method replayed twice
    rows, verdicts, surface = [], [], []
    tick = bar("replaying the streams", len(streams) * (len(methods) * (1 + each) + len(trees)))

    def serve(method, stream, priced=None):
        tick(description=f"replaying {len(stream.arrival)} requests ({_stream_label(stream.meta)}): "
             f"{method.name if method else 'plain'}")
        return replay_load(scored, priced or cost, method, stream, r.max_batch, tokens,
                           charged.get(method.family, DecisionCharge.flat(0.0)) if method else 0.0, r.seed, r.live)

    for stream in streams:
        runs = [next(real, None) for _ in methods]
        served = [serve(m, stream, run and run.cost) for m, run in zip(methods, runs)]
        surface += [{"stream": stream.meta, "depth": depth, "size": size, **serve(tree, stream).summary(r.tpot_target)}
                    for depth, size, tree in trees]
        these = [_beside({**s.summary(r.tpot_target), "stream": stream.meta}, run, r.tpot_target)
                 for s, run in zip(served, runs)]
        for row, method in zip(these, methods) if each else ():  # the same stream under the first refit
            row["rel_error_first_refit"] = _errors(serve(method, stream).summary(r.tpot_target), row["real"])
        rows += these
        best, pays = _best_speculative(these)
        verdict = {"stream": stream.meta, "best": best_row(these)["method"], "best_speculative": best["method"],
                   "speculation_pays": pays}
        if r.live:
            verdict["speculation_pays_real"] = _best_speculative([row["real"] for row in these])[1]
        verdicts.append(verdict)
    summary = {"schema": "simspec-load", "schema_version": 1, "simspec_version": __version__,
               "profile": r.profile, "profile_hash": profile.meta.inputs_hash, "device": profile.meta.device,
               "kind": profile.kind, "target": profile.meta.target, "draft": profile.meta.draft,
               "dtype": profile.dtype, "prompts": traces.meta.prompts, "traces_hash": traces.content_hash(),
               "machine": machine("cpu" if profile.meta.device.startswith("cpu") else "cuda") if r.live
               else None, "max_batch": r.max_batch, "tpot_target_s": r.tpot_target, "split": r.split,
               "max_new_tokens": tokens, "seed": r.seed, "temperature": traces.temperature, "live": r.live,
               "rows": rows, "verdicts": verdicts, "surface": surface, "refit": live.refit if live else None}
    if r.out:
        from simspec.report.figures import load_folder

        summary["written"] = load_folder(summary, r.out, r.force)
    return summary


def _stream_label(meta: dict) -> str:
    return meta["kind"] + (f", {meta['rate']:g}/s" if "rate" in meta else "")


def _surface_trees(sizes: tuple[int, ...], train, cost, max_new_tokens: int | None, status) -> list:
    """(D, V, static tree) per ``--surface`` size, at the depth replaying fastest on the train split."""
    from simspec.policies.base import tree_capacities
    from simspec.sim.evaluate import GRID_DEPTHS, grid_policy, static_surface

    if not sizes:
        return []
    with status("choosing each surface size's depth on the train split"):
        cells = static_surface(train, cost, max_new_tokens, GRID_DEPTHS[1:], sizes)
    trees = []
    for v in sizes:
        depth = max((d for d, size in cells if size == v), key=lambda d: float(np.mean(cells[d, v].speedup)))
        trees.append((depth, v, grid_policy(depth, train.width, int(min(v, tree_capacities(depth, train.width))))))
    return trees


def _best_speculative(rows: list[dict]) -> tuple[dict, bool]:
    """The best row after plain decoding's (the first), and whether it serves better than plain decoding."""
    best = best_row(rows[1:]) if len(rows) > 1 else rows[0]
    return best, better(best, rows[0]) > 0


COMPARED = ("throughput_tokens_per_s", "tpot_p50_s", "tpot_p90_s", "ttft_p50_s")


def _beside(row: dict, real: RealRun | None, tpot_s: float) -> dict:
    """``row`` (the replay's) with the real run's metrics and the replay's relative error on ``COMPARED``."""
    if real is None:
        return row
    measured = real.result.summary(tpot_s)
    return {**row, "real": measured, "lossless": real.lossless, "rel_error": _errors(row, measured),
            **({"refit": real.refit} if real.refit else {})}


def _errors(replayed: dict, measured: dict) -> dict:
    return {k: replayed[k] / measured[k] - 1 if measured[k] else None for k in COMPARED}


@dataclass(frozen=True)
class RealRun:
    """A stream served for real by one method; with ``--refit-each-stream``, the refit made right before it."""

    result: LoadResult
    lossless: bool | None
    cost: object | None = None
    refit: dict | None = None


@dataclass
class Live:
    """A live run's engine rows and scored prompts' token ids; with ``--recalibrate``, the refit's cost model,
    and with ``--refit-each-stream`` how to refit again (``again() -> (cost, record)``)."""

    rows: object  # a SpeculativeEngine of max_batch rows
    ids: list[list[int]]
    cost: object | None = None
    refit: dict | None = None
    again: Callable[[], tuple[object, dict]] | None = None


def _live(r: LoadRequest, scored, train, tokens: int, bar, status) -> Live:
    """The pair through ``--max-batch`` rows; with ``--recalibrate``, the profile first refitted through them."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.insitu import ladder_points
    from simspec.measure.insitu_batch import refit_batch
    from simspec.measure.interleave import load_engine
    from simspec.sim.profile import load_live_profile

    profile = load_live_profile(r.profile, "load --live")
    if not scored.has_prompt_tokens:
        raise SimspecError(f"the traces of {profile.directory} hold no prompt tokens, which load --live serves: add "
                           f"them with `simspec migrate-traces --traces FOLDER`")
    ids = [t.tolist() for t in scored.prompt_token_lists()]
    refit_on = list(zip(train.meta.prompt_ids, (t.tolist() for t in train.prompt_token_lists())))
    refit_on = refit_on[:r.recalibrate_prompts] if r.recalibrate else []
    with status("loading the profile's target and drafter"):
        engine, _ = load_engine(profile, [], tokens, status)
    ladder = ladder_points(r.refit_ladder)
    room = tokens + (max(scored.depth_max, *(d for d, _ in ladder)) if refit_on else scored.depth_max)
    for one in ids + [i for _, i in refit_on]:
        engine.check_length(one, room)
    rows = SpeculativeEngine(engine.target, engine.drafter, engine.sampling, batch_size=r.max_batch)
    if not refit_on:
        return Live(rows, ids)

    def refit() -> tuple[object, dict]:
        from simspec.sim.profile import cost_model

        done = refit_batch(rows, profile, refit_on, tokens, bar, ladder)
        return cost_model(done.samples), {"prompts": [p for p, _ in refit_on], "seconds": done.record["seconds"],
                                          "live_over_profile": done.record["live_over_profile"]}

    return Live(rows, ids, *refit(), again=refit if r.refit_each_stream else None)


def serve_real(live: Live, streams: list, methods: list, max_new_tokens: int,
               status: Callable[[str], object]) -> list[RealRun]:
    """Per stream and method (plain first): the real run's latencies, whether outputs equal plain decoding's,
    and with ``live.again`` the refit made right before it."""
    from simspec.measure.insitu_batch import WARM_UP_TOKENS

    rows, ids = live.rows, live.ids
    longest = sorted(ids, key=len)[-rows.batch:]
    with status("warming up: every method on the longest prompts, all rows busy"):
        for method in methods:  # allocators grow and first paths run before any timed stream, for every method alike
            rows.decode(longest, method, WARM_UP_TOKENS)
    out = []
    for stream in streams:
        prompts = [ids[p] for p in stream.prompt]
        reference = None
        for method in methods:
            cost, refit = live.again() if live.again is not None else (None, None)
            with status(f"serving {len(prompts)} requests for real ({_stream_label(stream.meta)}): "
                        f"{'plain' if method is None else method.name}"):
                run = rows.decode(prompts, method, max_new_tokens, arrivals=list(stream.arrival))
            outputs = [g.tokens for g in run.generations]
            reference = reference or outputs
            lossless = None if not rows.sampling.greedy else outputs == reference
            gens = run.generations
            out.append(RealRun(LoadResult("plain" if method is None else method.name,
                                          np.asarray(stream.arrival, float), np.array([g.first_token_at for g in gens]),
                                          np.array([g.finished_at for g in gens]),
                                          np.array([len(g.tokens) for g in gens]), run.cycles), lossless, cost, refit))
    return out
