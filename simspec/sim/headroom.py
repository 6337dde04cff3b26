"""``simspec headroom``: how much an adaptive policy could add on a profile, before anyone trains
one (numpy only).

On the profile's held-out traces, per batch size (priced at the batch's curves), side by side:
the hindsight oracle (not reachable by a policy), the information bound (``simspec.sim.bound``,
its classifier fitted on the train split; optionally with each cycle's history), the best static
tree, the seeds' rules (tuned on the train split) and any learned policies. Each row is a median
speedup over prompts with its interquartile range and its share of the oracle's. The verdict is
the bound over the best static tree: what no policy deciding from node scores can beat. The bound
reads the greedy path: at T > 0 only the oracle stands above the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.policies.registry import baselines_help, default_baselines
from simspec.sim.evaluate import methods_flag


@dataclass(frozen=True, kw_only=True)
class HeadroomRequest:
    profile: str = flags.profile()
    batch_sizes: tuple[int, ...] = flags.batch_sizes((1,), parse=flags.ints)
    baselines: tuple[str, ...] = opt(factory=default_baselines, help=baselines_help, parse=methods_flag)
    policies: tuple[str, ...] = flags.policies()
    history: bool = opt(False, "Also the information bound with each cycle's history (the prompt's recent "
                        "acceptance and the context length) beside the node scores: a few minutes more.")
    max_new_tokens: int | None = flags.max_new_tokens(None, min=2)
    temperature: float | None = flags.temperature(None)
    out: str | None = flags.out()
    force: bool = flags.force()

    def __post_init__(self):
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise SimspecError(f"--batch-sizes takes batch sizes >= 1, e.g. 1,4; got "
                               f"{','.join(map(str, self.batch_sizes))}")


def _row(method: str, kind: str, speedup: np.ndarray, oracle: np.ndarray) -> dict:
    q25, median, q75 = (float(x) for x in np.percentile(speedup, [25, 50, 75]))
    return {"method": method, "kind": kind, "speedup": median, "q25": q25, "q75": q75,
            "share_of_oracle": median / float(np.median(oracle))}


def run(request: HeadroomRequest, bar, status) -> dict:
    """Every row and the verdict per batch size (``--out`` is checked here, written by ``report.figures``)."""
    from simspec import __version__
    from simspec.cache import check_out
    from simspec.sim.evaluate import build_baselines, check_names, method_set, split_traces
    from simspec.sim.labels import WHOLE_TREE, fit_node_predictor
    from simspec.sim.profile import load_profile

    r = request
    if r.out:
        check_out(r.out, r.force)
    check_names(list(r.baselines))
    profile = load_profile(r.profile)
    profile.require_temperature(r.temperature)
    costs = {b: profile.cost.at_batch(b) for b in r.batch_sizes}  # a batch size without curves: one line
    traces = profile.traces()
    train, held = split_traces(traces, "train"), split_traces(traces, "heldout")
    with status("loading the policies"):
        learned, charged, notes = method_set([], list(r.policies), profile, train, r.max_new_tokens)
    predictor = None
    if not traces.sampled:
        with status("fitting the node classifier on the train split"):
            predictor = fit_node_predictor(train, WHOLE_TREE)
    else:
        notes.append("the information bound reads the greedy path: on sampled traces only the hindsight oracle "
                     "stands above the rules")
    tick = bar("batch sizes: oracle, bound, grid, rules, policies", len(costs) * (4 + r.history))
    batches = []
    for batch, cost in costs.items():
        with status(f"batch {batch}: tuning the baselines on the train split"):
            methods = build_baselines(list(r.baselines), train, cost, r.max_new_tokens) if r.baselines else []
        methods = [m for m in methods if m.family != "grid"]  # the grid best is a row of its own
        batches.append(_batch(batch, cost, train, held, predictor, methods + learned, charged, r, tick))
    return {"schema": "simspec-headroom", "schema_version": 1, "simspec_version": __version__,
            "profile": r.profile, "profile_hash": profile.meta.inputs_hash, "kind": profile.kind,
            "device": profile.meta.device, "target": profile.meta.target, "draft": profile.meta.draft,
            "dtype": profile.dtype, "prompts": traces.meta.prompts, "traces_hash": traces.content_hash(),
            "temperature": traces.temperature, "heldout_prompts": held.n_prompts,
            "max_new_tokens": r.max_new_tokens, "batches": batches, "notes": notes}


def _batch(batch: int, cost, train, held, predictor, methods: list, charged: dict, r: HeadroomRequest, tick) -> dict:
    """One batch size's rows, best first, and its verdict."""
    from simspec.sim.bound import history_bound, history_predictor, information_bound
    from simspec.sim.evaluate import grid_best
    from simspec.sim.oracle import oracle
    from simspec.sim.replay import replay

    tokens = r.max_new_tokens
    best = oracle(held, cost, tokens).speedup
    rows = [_row("oracle (hindsight)", "oracle", best, best)]
    tick()
    bound = None
    if predictor is not None:
        bound = information_bound(held, cost, predictor, max_new_tokens=tokens)
        rows.append(_row("information bound (node scores)", "bound", bound.speedup, best))
    tick()
    if predictor is not None and r.history:
        kappa = information_bound(train, cost, predictor, max_new_tokens=tokens).kappa
        with_history = history_bound(held, cost, history_predictor(train, cost, predictor, kappa),
                                     max_new_tokens=tokens)
        rows.append(_row("information bound (node scores + history)", "bound", with_history.speedup, best))
        tick()
    grid = grid_best(train, cost, tokens)
    static = replay(held, cost, grid, tokens, charged.get(grid.family, 0.0)).speedup
    rows.append(_row(grid.name, "static", static, best))
    tick()
    rows += [_row(m.name, "learned" if m.family.startswith("policy:") else "rule",
                  replay(held, cost, m, tokens, charged.get(m.family, 0.0)).speedup, best) for m in methods]
    tick()
    top = rows[1] if bound is not None else rows[0]
    static_median = float(np.median(static))
    verdict = {"ceiling": top["method"], "over_best_static": top["speedup"] / static_median - 1,
               "best_static": grid.name, "oracle_over_best_static": rows[0]["speedup"] / static_median - 1}
    return {"batch_size": batch, "rows": sorted(rows, key=lambda row: -row["speedup"]), "verdict": verdict}


def verdict_line(batch: dict) -> str:
    v = batch["verdict"]
    where = f" at batch {batch['batch_size']}" if batch["batch_size"] > 1 else ""
    head = (f"on this profile{where} an adaptive policy can add at most {v['over_best_static']:+.1%} over the best "
            f"static tree ({v['best_static']})")
    if v["ceiling"].startswith("oracle"):
        return head + ": the hindsight oracle, which no policy reaches"
    return head + f"; the hindsight oracle's {v['oracle_over_best_static']:+.1%} is what node scores cannot tell"
