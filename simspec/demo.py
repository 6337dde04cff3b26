"""``simspec demo``: the whole loop on the shipped defaults, each step an ordinary simspec command,
and a summary read back from what the steps wrote."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simspec import flags
from simspec.errors import SimspecError

TRACES = "calibration/traces-humaneval-eagle"


def _algos() -> tuple[str, ...]:
    from simspec.policies.algorithms import algo_names  # read when --help is built, after plugins register

    return algo_names()


@dataclass(frozen=True, kw_only=True)
class DemoRequest:
    out: str = flags.out("demo")
    algos: tuple[str, ...] = flags.algos(("ltd", "radar"), _algos)
    preset: str = flags.preset("fast")
    n_prompts: int = flags.n_prompts(8)
    max_new_tokens: int = flags.max_new_tokens(32, min=4)
    runtime: str = flags.runtime()
    force: bool = flags.force()

    def check(self) -> Path:
        """The flags, the output folder and the shipped traces; returns the traces folder."""
        from simspec.cache import check_out
        from simspec.engine.runtime import check_runtime
        from simspec.policies.algorithms import LEARNED, algo_names
        from simspec.shipped import locate, missing_hint
        from simspec.train.run import check_preset

        check_runtime(self.runtime)
        check_preset(self.preset)
        if not self.algos or any(a not in LEARNED for a in self.algos):
            *most, last = algo_names()
            raise SimspecError(f"--algos takes {', '.join(most)} and/or {last}, got {','.join(self.algos)!r}")
        check_out(self.out, self.force)
        traces = locate(TRACES)
        if not (traces / "traces.json").is_file():
            raise SimspecError(f"the shipped traces are missing: {missing_hint()}")
        return traces

    def policies(self) -> list[Path]:
        return [Path(self.out) / "policies" / a for a in self.algos]

    def steps(self, traces: Path) -> list[list[str]]:
        """The simspec commands the demo runs, in order."""
        from simspec.measure.engine_fit import QUICK_PROMPTS

        root = Path(self.out)
        profile, figures = root / "profile", root / "figures"
        # The engine fit runs as many new tokens as the validation (the contexts it prices), and
        # no more prompts than it scores.
        fit_prompts = min(self.n_prompts, QUICK_PROMPTS)
        steps = [["calibrate", "--gpu", "cpu", "--quick", "--traces-from", str(traces), "--out", str(profile),
                  "--runtime", self.runtime, "--engine-tokens", str(self.max_new_tokens),
                  "--engine-prompts", str(fit_prompts)],
                 ["plot", "curves", "--profile", str(profile), "--out", str(figures)],
                 ["headroom", "--profile", str(profile), "--baselines", "gammatune,fsm", "--max-new-tokens",
                  str(self.max_new_tokens), "--out", str(root / "headroom")]]
        for algo, policy in zip(self.algos, self.policies()):
            steps += [["train", "--simulated", "--profile", str(profile), "--algo", algo, "--preset", self.preset,
                       "--out", str(policy)],
                      ["plot", "training", "--policy", str(policy), "--out", str(figures)]]
        steps.append(["validate", "--real", "--profile", str(profile), "--baselines", "eagle3,grid,gammatune",
                      "--policies", ",".join(map(str, self.policies())), "--n-prompts", str(self.n_prompts),
                      "--max-new-tokens", str(self.max_new_tokens), "--runtime", self.runtime,
                      "--out", str(root / "validate")])
        return steps


def run_demo(request: DemoRequest, invoke: Callable[[list[str]], None],
             announce: Callable[[int, int, list[str]], None]) -> dict:
    """Runs every step through ``invoke``, announcing each; nothing is left at ``--out`` on a failure."""
    traces = request.check()
    root = Path(request.out)
    shutil.rmtree(root, ignore_errors=True)
    steps = request.steps(traces)
    started = time.perf_counter()
    try:
        for i, step in enumerate(steps, 1):
            announce(i, len(steps), step)
            invoke(step)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)  # no half-made demo folder
        raise
    return summary(request, time.perf_counter() - started)


def summary(request: DemoRequest, seconds: float) -> dict:
    """What the steps wrote: the calibration, each policy's training and the real validation."""
    from simspec.policies.artifact import HeldOut, read_policy_meta
    from simspec.report.validation import read_report
    from simspec.sim.profile import load_profile

    root = Path(request.out)
    profile = load_profile(root / "profile")
    policies = []
    for path in request.policies():
        _, meta = read_policy_meta(path)
        held, nan = meta.heldout or HeldOut(), float("nan")
        policies.append({"algo": meta.algo, "preset": meta.preset,
                         "train_seconds": nan if meta.train_seconds is None else meta.train_seconds,
                         "speedup": nan if held.speedup is None else held.speedup,
                         "grid_best_speedup": nan if held.grid_best_speedup is None else held.grid_best_speedup})
    return {"root": str(root), "device": profile.meta.device, "device_model": profile.meta.device_model,
            "curves_seconds": profile.meta.seconds["curves"],
            "headroom": json.loads((root / "headroom" / "headroom.json").read_text())["batches"][0],
            "engine_fit_seconds": profile.meta.seconds.get("engine_fit"),
            "fit_error_median": profile.meta.fit_error.median, "policies": policies,
            "report": read_report(root / "validate"), "seconds": seconds}
