"""How far to trust a profile's prediction today: its age and machine, the drift of plain decoding
(which divides every speedup) before, through and after the runs it predicts, and an interval
around every predicted speedup, from the profile's replicates and the drift measured in the run."""

from __future__ import annotations

import time
from calendar import timegm

import numpy as np

from simspec.measure.interleave import DriftMeter

INTERVAL = (5.0, 95.0)  # percentiles of the replicates' predictions
DRIFT_NOTE = 0.03  # plain decoding moving more than this over the runs is said plainly


def plain_ratio(engine, ids: list[int], tokens: int, cost, width: int) -> float:
    """One plain decode's live time over the profile's price, after an untimed one (the first runs cold)."""
    engine.plain(ids, min(8, tokens))
    meter = DriftMeter(cost, width)
    meter.greedy(engine.plain(ids, tokens))
    return meter.ratios()["greedy step"]


def _age_hours(created: str | None) -> float | None:
    try:
        return round((time.time() - timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))) / 3600, 2)
    except (TypeError, ValueError):  # none recorded, or not a timestamp
        return None


def thirds(runs) -> dict[str, float]:
    """Plain decoding's live / profile ratio over the first, middle and last third of the scored slots."""
    plain = sorted((r for r in runs if r.method == "greedy"), key=lambda r: r.slot)
    out = {}
    for name, part in zip(("start", "middle", "end"), np.array_split(np.arange(len(plain)), 3)):
        if len(part):
            measured = sum(float(np.sum(plain[i].measured["greedy step"])) for i in part)
            predicted = sum(float(np.sum(plain[i].predicted["greedy step"])) for i in part)
            out[name] = round(measured / predicted, 4)
    return out


def staleness(profile, here_model: str, runs, before: float, after: float) -> dict:
    """The report's ``staleness`` block: the profile's age and machine, plain decoding's drift, notes."""
    meta = profile.meta
    fitted = (meta.in_situ or {}).get("created") or (meta.engine_fit or {}).get("created") or meta.created
    through = thirds(runs)
    plain = {"before": round(before, 4), **through, "after": round(after, 4)}
    # Like with like: the probes time one prompt, the thirds every prompt of theirs.
    moved = max(abs(after / before - 1), max(through.values()) / min(through.values()) - 1 if through else 0.0)
    same = meta.device_model == here_model
    notes = []
    if not same:
        notes.append(f"the profile was measured on {meta.device_model}, this is {here_model}")
    if moved > DRIFT_NOTE:
        notes.append(f"the machine drifted: plain decoding's speed moved {moved:.1%} during the runs (live / "
                     f"profile before {before:.3f}, after {after:.3f}; by thirds "
                     + ", ".join(f"{v:.3f}" for v in through.values()) + "): part of any error is that drift")
    level = float(np.median(list(plain.values())))
    if abs(level - 1) > DRIFT_NOTE:
        notes.append(f"plain decoding ran at {level:.3f}x the profile's time: the machine is "
                     f"{'slower' if level > 1 else 'faster'} than when it was calibrated")
    return {"profile_created": meta.created, "fitted": fitted, "age_hours": _age_hours(fitted),
            "engine_fit": meta.engine_fit is not None, "profile_device_model": meta.device_model,
            "device_model": here_model, "same_device": same, "plain_live_over_profile": plain,
            "plain_moved": round(moved, 4), "notes": notes}


def replicate_factors(profile) -> list[dict]:
    """The per-curve factors of the profile's spread: its in-situ refit's, else its engine fit's."""
    return list((profile.meta.in_situ or profile.meta.engine_fit or {}).get("replicates", []))


def intervals(samples: list[dict], simulate, simulated: dict, corrected: dict, factors: list[dict]) -> dict:
    """Per method, the interval (percentiles ``INTERVAL``) of its predicted speedup over the set under
    each replicate's curves (``factors``), joined with the same spread around the drift-corrected
    prediction. Empty without replicates."""
    from simspec.measure.refit import replicate_samples
    from simspec.sim.profile import cost_model

    if not factors:
        return {}
    replays = [simulate(cost_model(replicate_samples(samples, f))) for f in factors]
    out = {}
    for name, point in simulated.items():
        centre = point.set_speedup
        values = np.array([r[name].set_speedup for r in replays] + [centre])  # the interval holds its point
        lo, hi = np.percentile(values, INTERVAL)
        lo, hi = min(lo, centre), max(hi, centre)
        shift = corrected[name].set_speedup / centre
        out[name] = {"profile": [float(lo), float(hi)],
                     "with_drift": [float(min(lo, lo * shift)), float(max(hi, hi * shift))]}
    return out


def add_intervals(report: dict, by_method: dict) -> None:
    """Puts each method's interval (``intervals``) and whether the real speedup lies in it on its row."""
    if not by_method:
        return
    inside = []
    for row in report["rows"]:
        interval = by_method[row["method"]]
        lo, hi = interval["with_drift"]
        row["speedup_sim_set_interval"] = [lo, hi]
        row["speedup_sim_set_interval_profile"] = interval["profile"]
        row["in_interval"] = bool(lo <= row["speedup_real_set"] <= hi)
        inside.append(row["in_interval"])
    report["intervals"] = {"percentiles": [5, 95], "coverage": float(np.mean(inside)), "rows": len(inside),
                           "sources": "the profile's spread (engine-fit bootstrap) joined with the drift measured "
                                      "in this run"}
