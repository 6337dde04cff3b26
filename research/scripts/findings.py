"""docs/findings.md: the seed papers' claims, checked on the demo pair in the simulator.

Trains what the claims need (LTD fast preset per reward and per ablation, Re-SpS fast, for each
seed), scores everything on cpu-demo's held-out traces with `simspec validate --simulated`, and
writes every number to research/runs/findings/findings.json. Resumable: trained policies are kept in
--work and not trained again.

    .venv/bin/python research/scripts/findings.py --seeds 0,1 --work /tmp/simspec-findings
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PROFILE, PROFILE_T1 = "calibration/cpu-demo", "calibration/cpu-demo-T1"
SIMSPEC = str(ROOT / ".venv" / "bin" / "simspec")


def simspec(*args: str) -> dict:
    done = subprocess.run([SIMSPEC, *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"simspec {' '.join(args)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def train(work: Path, name: str, *args: str) -> Path:
    out = work / name
    if not (out / "policy.json").exists():
        started = time.time()
        simspec("train", "--simulated", "--profile", PROFILE, "--preset", "fast", "--threads", "1", "--out", str(out),
                "--force", "--json", *args)
        print(f"trained {name} in {time.time() - started:.0f} s", flush=True)
    return out


def score(profile: str, baselines: str, policies: list[Path] = (), temperature: float = 0.0) -> dict[str, dict]:
    args = ["validate", "--simulated", "--profile", profile, "--baselines", baselines, "--json",
            "--temperature", str(temperature)]
    if policies:
        args += ["--policies", ",".join(map(str, policies))]
    return {row["method"]: row for row in simspec(*args)["rows"]}


def acceptance_rate(row: dict) -> float:
    """Accepted draft tokens per draft step: (tau - 1) * cycles / draft calls."""
    return (row["tau"] - 1) * row["cycles"] / row["draft_calls"]


def resps_holds(policy: Path, holds: list[int]) -> list[dict]:
    """One trained Re-SpS network deployed at each interval N: decision time per cycle
    measured here (whole intervals), held-out speedup with that charge."""
    from simspec.policies.artifact import load_policy
    from simspec.policies.timing import policy_latency
    from simspec.sim.evaluate import split_traces
    from simspec.sim.profile import load_profile
    from simspec.sim.replay import replay

    profile = load_profile(PROFILE)
    heldout = split_traces(profile.traces(), "heldout")
    rows = []
    for hold in holds:
        net, _ = load_policy(str(policy), profile.meta["inputs_hash"])
        net.hold = hold
        decision = policy_latency({"p": net}, heldout.width, 4, 300)["p"]
        result = replay(heldout, profile.cost, net, None, decision)
        q25, med, q75 = np.percentile(result.speedup, [25, 50, 75])
        rows.append({"hold": hold, "decision_seconds": decision, "speedup_median": med, "speedup_q25": q25,
                     "speedup_q75": q75, "tau": float(result.tokens.sum() / result.cycles.sum())})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--work", default="/tmp/simspec-findings")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work)
    from simspec import __version__
    from simspec.machine import machine

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    out: dict = {"schema": "simspec-findings", "schema_version": 1, "simspec_version": __version__,
                 "commit": commit.stdout.strip(), "machine": machine(), "profile": PROFILE, "profile_t1": PROFILE_T1,
                 "temperature": {"ltd": 0.0, "ltd_t1": 1.0, "radar_t1": 1.0, "resps_hold": 0.0, "seed003": 0.0,
                                 "seed003_h100_analytic": 0.0},
                 "seeds": seeds, "preset": "fast", "created": time.strftime("%Y-%m-%d")}

    # LTD Tab. 2 (reward), Tab. 4 (no size / no depth policy), Tab. 7 (no co-adaptation).
    variants = {"throughput": [], "acceptance": ["--reward", "acceptance"], "time": ["--reward", "time"],
                "no-size": ["--ablate", "size"], "no-depth": ["--ablate", "depth"], "no-rounds": ["--ablate", "rounds"]}
    ltd = {v: [] for v in variants}
    for seed in seeds:
        trained = {v: train(work, f"ltd-{v}-s{seed}", "--algo", "ltd", "--seed", str(seed), *a)
                   for v, a in variants.items()}
        rows = score(PROFILE, "grid", list(trained.values()))
        for v, path in trained.items():
            ltd[v].append(rows[path.name])
        out.setdefault("grid", rows[next(k for k in rows if k.startswith("grid"))])
    out["ltd"] = {v: [{k: r[k] for k in ("speedup_median", "speedup_q25", "speedup_q75", "tau", "draft_calls")}
                      for r in runs] for v, runs in ltd.items()}

    # LTD Tab. 5: trained at T = 0, scored at T = 1 against EAGLE-3's tree (the shipped policy).
    rows = score(PROFILE_T1, "eagle3,grid", [ROOT / "policies/ltd-cpu-demo", ROOT / "policies/ltd-cpu-demo-T1"], 1.0)
    out["ltd_t1"] = rows

    # RADAR at T = 1: draft calls and tau against the static trees.
    out["radar_t1"] = score(PROFILE_T1, "eagle3,grid", [ROOT / "policies/radar-cpu-demo-T1"], 1.0)

    # Re-SpS Fig. 3: the interval N, on one trained network per seed.
    out["resps_hold"] = {seed: resps_holds(train(work, f"resps-s{seed}", "--algo", "resps", "--seed", str(seed)),
                                           [1, 3, 10, 30, 100]) for seed in seeds}

    # Seed 003 Fig. 3: analytic window vs FSM, cache-FSM and Q-learning.
    rows = score(PROFILE, "analytic,fsm,cachefsm-token,qlearn-paper,cachefsm,qlearn,specdecpp,disco,grid,eagle3")
    for row in rows.values():
        row["acceptance_rate"] = acceptance_rate(row)
    out["seed003"] = rows
    # The same on an ANALYTIC H100 profile of the demo pair (its roofline curves, the same traces).
    rows = score("calibration/h100-demo-analytic", "analytic,fsm,cachefsm-token,qlearn-paper,grid,eagle3")
    for row in rows.values():
        row["acceptance_rate"] = acceptance_rate(row)
    out["seed003_h100_analytic"] = rows
    target = ROOT / "research/runs/findings/findings.json"
    target.write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
