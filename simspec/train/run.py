"""``simspec train --simulated``: trains the algorithm on the profile's training traces, times the
deployed policy's decisions here, scores it on the held-out prompts next to EAGLE-3's tree, the
best static tree and the oracle, and writes ``policies/<name>/`` (``simspec.policies.artifact``)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.machine import machine
from simspec.policies.algorithms import algos_help, learned
from simspec.policies.artifact import write_policy
from simspec.sim.envs import REWARDS
from simspec.sim.evaluate import build_baselines, evaluate, grid_policy
from simspec.sim.profile import Profile, load_profile
from simspec.sim.replay import replay
from simspec.train.log import TrainingLog
from simspec.train.setting import PRECISIONS, prepare
from simspec.train.trainers import TRAINERS, trainer

PRESETS = ("paper", "fast", "smoke")


def check_preset(preset: str) -> None:
    """``--preset``: one of ``PRESETS`` (train's, and the schedule demo hands to it)."""
    if preset not in PRESETS:
        raise SimspecError(f"unknown --preset {preset!r}: choose from {', '.join(PRESETS)}")


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    profile: str = flags.profile()
    algo: str = opt(help=algos_help)
    preset: str = flags.preset("paper")
    reward: str = opt("throughput", "throughput (tokens per second of each cycle, LTD's), acceptance (tokens per "
                      "cycle, the proxy) or time (seconds saved over greedy).")
    seed: int = flags.seed()
    out: str | None = flags.out()
    force: bool = flags.force()
    precision: str = opt("auto", "PPO's hidden layers: fp32, or bf16 (autocast; weights, heads, losses, Adam and the "
                         "exported policy stay fp32). auto: the algorithm's own choice (LTD's wide networks: bf16 "
                         "where the CPU has native bf16, twice as fast; else fp32).")
    # The algorithm's own options (``simspec.train.trainers``), filled by the verb; None: its defaults
    options: object = opt(None, "The algorithm's own options.", cli=False)

    def __post_init__(self) -> None:
        if self.options is None and self.algo in TRAINERS:
            object.__setattr__(self, "options", trainer(self.algo).options())

    def resolved_precision(self) -> str:
        """``auto``: the algorithm's own choice (``TrainerSpec.auto_precision``)."""
        return trainer(self.algo).auto_precision() if self.precision == "auto" else self.precision

    def check(self) -> Profile:
        """Every flag, the output folder, the profile and its traces, before any work; the profile."""
        from simspec.cache import check_out

        learned(self.algo)  # a registered algorithm, else one line naming them
        spec = trainer(self.algo)
        check_preset(self.preset)
        if self.reward not in REWARDS:
            raise SimspecError(f"unknown --reward {self.reward!r}: choose from {', '.join(REWARDS)}")
        if self.precision not in ("auto", *PRECISIONS):
            raise SimspecError(f"unknown --precision {self.precision!r}: choose from auto, {', '.join(PRECISIONS)}")
        if self.precision != "auto" and self.precision not in spec.precisions:
            raise SimspecError(f"--precision {self.precision} does not apply to --algo {self.algo}: it trains in "
                               f"{' or '.join(spec.precisions)}")
        if not isinstance(self.options, spec.options):
            raise SimspecError(f"--algo {self.algo} takes {spec.options.__name__}, not {type(self.options).__name__}")
        self.options.check()
        check_out(self.out_dir(), self.force)
        profile = load_profile(self.profile)
        profile.traces()  # read and checked now (kept for the run), not after the progress bar is up
        return profile

    def out_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        parts = [self.options.label(self.algo), Path(self.profile).name, "" if self.preset == "paper" else self.preset,
                 "" if self.reward == "throughput" else self.reward, *self.options.name_parts()]
        return Path("policies") / "-".join(part for part in parts if part)


def total_work(request: TrainRequest) -> int:
    """Units of the progress bar: environment steps (PPO) or updates (RADAR)."""
    return trainer(request.algo).work(request)


def train_policy(request: TrainRequest, advance: Callable[[int], None] = lambda n: None) -> dict:
    """Runs the request; returns the summary (the ``--json`` line)."""
    from simspec.policies.timing import policy_latency

    profile = request.check()
    out = request.out_dir()
    precision = request.resolved_precision()
    setting = prepare(profile, request.reward, request.seed, precision=precision)
    log = TrainingLog()
    work = Path(tempfile.mkdtemp(prefix=".simspec-train-"))
    try:
        started = time.perf_counter()
        fitted = trainer(request.algo).fit(request, setting, log, advance, work)
        train_seconds = time.perf_counter() - started
        policy, env_steps = fitted.policy, fitted.env_steps
        policy.name = out.name
        # Decision latency at the depth the policy drafts to on validation prompts.
        result = replay(setting.validation, setting.cost, policy, setting.max_new_tokens)
        depth = max(2, int(round(result.draft_calls.sum() / result.cycles.sum() + 1)))
        decision = policy_latency({"policy": policy}, setting.width, depth, 200)["policy"]
        grid = grid_policy(setting.grid_depth, setting.width, setting.grid_size)  # searched once, by prepare()
        grid_validation = setting.validation_speedup(grid)
        policy.family = f"policy:{out.name}"
        baselines = [*build_baselines(["eagle3"], setting.train, setting.cost, setting.max_new_tokens), grid]
        static_seconds = (profile.meta.policy_seconds or {}).get("static", 0.0)
        rows, oracle_row, _ = evaluate(setting.heldout, setting.cost, [policy, *baselines], setting.max_new_tokens,
                                       {policy.family: decision, "eagle3": static_seconds, "grid": static_seconds})
        learned, eagle3, grid_row = rows
        log.write_csv(work / "training.csv")
        meta = {
            "name": out.name, "algo": request.algo, "preset": request.preset, "reward": request.reward,
            "seed": request.seed, "precision": precision,
            **request.options.meta(),  # the algorithm's own options (Re-SpS's variant, LTD's ablation, ...)
            "schedule": fitted.schedule, "policy": fitted.spec, "env_steps": env_steps, "train_seconds": train_seconds,
            "steps_per_second": env_steps / train_seconds, "machine": machine(),
            "profile": {"name": profile.directory.name, "path": str(profile.directory),
                        "inputs_hash": profile.meta.inputs_hash, "device": profile.meta.device, "kind": profile.kind},
            "traces_hash": setting.train.meta.content_hash, "dataset": setting.train.meta.dataset,
            "temperature": profile.temperature,
            "prompts": {"fit": setting.fit.n_prompts, "validation": setting.validation.n_prompts,
                        "heldout": setting.heldout.n_prompts},
            "grid_best": {"depth": setting.grid_depth, "size": setting.grid_size},
            "decision_seconds": decision, "decision_depth": depth,
            "validation": {"best_speedup": fitted.validation_speedup, "grid_best_speedup": grid_validation,
                           "curve": log.validation_curve()},
            "heldout": {"speedup": learned.speedup_median, "speedup_mean": learned.speedup_mean, "tau": learned.tau,
                        "oracle_share": learned.share_of_oracle, "grid_best_speedup": grid_row.speedup_median,
                        "eagle3_speedup": eagle3.speedup_median, "oracle_speedup": oracle_row.speedup_median},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        extra = {name: work / name for name in [*fitted.files, "training.csv"]}
        if (work / "tb").exists():
            extra["tb"] = work / "tb"
        write_policy(out, meta, fitted.arrays, extra, force=request.force)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"policy": str(out), "algo": request.algo, "train_seconds": train_seconds, "env_steps": env_steps,
            "heldout_speedup": learned.speedup_median, "grid_best_speedup": grid_row.speedup_median,
            "eagle3_speedup": eagle3.speedup_median, "oracle_share": learned.share_of_oracle}
