"""``simspec train --simulated``: one request in, one policy artifact and its summary out.

Trains the algorithm against the profile's cost model and training traces, measures the
deployed policy's decision latency on this machine, scores it on the held-out prompts next to
EAGLE-3's default tree, the best static tree and the hindsight oracle, and writes
``policies/<name>/`` (see ``simspec.policies.artifact``)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simspec.errors import SimspecError
from simspec.machine import machine
from simspec.policies.artifact import ALGOS, write_policy
from simspec.policies.base import BatchPolicy
from simspec.sim.envs import REWARDS
from simspec.sim.evaluate import build_baselines, evaluate, grid_policy
from simspec.sim.profile import Profile, load_profile
from simspec.sim.replay import replay
from simspec.train.log import TrainingLog
from simspec.train.setting import PRECISIONS, VARIANTS, Setting, prepare

PRESETS = ("paper", "fast")


@dataclass(frozen=True)
class TrainRequest:
    profile: str
    algo: str
    preset: str = "paper"
    reward: str = "throughput"
    seed: int = 0
    out: str | None = None
    variant: str = "standard"  # Re-SpS: standard or maxent
    force: bool = False
    precision: str = "auto"  # PPO hidden layers: auto, fp32 or bf16
    ablate: str | None = None  # LTD only: train without the size policy, the depth policy or co-adaptation
    hold: int | None = None  # Re-SpS only: cycles the deployed policy holds an action (default 30)
    train_hold: int | None = None  # Re-SpS only: cycles an action is held in training (default 10)

    def resolved_precision(self) -> str:
        """``auto``: bf16 for LTD's wide networks where this CPU has native bf16 (faster updates:
        docs/results.md#ltds-paper-schedule-fp32-and-bf16), fp32 for Re-SpS's small ones (nothing
        to gain) and everywhere else; RADAR's LSTM always trains in fp32."""
        from simspec.train.ppo import native_bf16

        if self.algo == "radar":
            return "fp32"
        if self.precision != "auto":
            return self.precision
        return "bf16" if self.algo == "ltd" and native_bf16() else "fp32"

    def check(self) -> Profile:
        """Every flag, the output folder, the profile and its traces, before any work; returns
        the profile."""
        from simspec.cache import check_out

        if self.algo not in ALGOS:
            raise SimspecError(f"unknown --algo {self.algo!r}: choose from {', '.join(ALGOS)}")
        if self.preset not in PRESETS:
            raise SimspecError(f"unknown --preset {self.preset!r}: choose from {', '.join(PRESETS)}")
        if self.reward not in REWARDS:
            raise SimspecError(f"unknown --reward {self.reward!r}: choose from {', '.join(REWARDS)}")
        if self.variant not in VARIANTS:
            raise SimspecError(f"unknown --variant {self.variant!r}: choose from {', '.join(VARIANTS)}")
        if self.variant != "standard" and self.algo != "resps":
            raise SimspecError("--variant applies to --algo resps only")
        if self.precision not in ("auto", *PRECISIONS):
            raise SimspecError(f"unknown --precision {self.precision!r}: choose from auto, {', '.join(PRECISIONS)}")
        from simspec.train.ltd import ABLATIONS

        if self.ablate is not None and (self.algo != "ltd" or self.ablate not in ABLATIONS):
            raise SimspecError(f"--ablate applies to --algo ltd and takes one of {', '.join(ABLATIONS)}"
                               + (f", not {self.ablate!r}" if self.algo == "ltd" else ""))
        for flag, value in (("--hold", self.hold), ("--train-hold", self.train_hold)):
            if value is not None and (self.algo != "resps" or value < 1):
                raise SimspecError(f"{flag} applies to --algo resps and takes a number of cycles >= 1")
        if self.precision == "bf16" and self.algo == "radar":
            raise SimspecError("--precision bf16 applies to the PPO algorithms (ltd, resps); radar trains in fp32")
        check_out(self.out_dir(), self.force)
        profile = load_profile(self.profile)
        profile.traces()  # read and checked now (kept for the run), not after the progress bar is up
        return profile

    def out_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        parts = [self.algo + ("-maxent" if self.variant == "maxent" else ""), Path(self.profile).name]
        if self.preset != "paper":
            parts.append(self.preset)
        if self.reward != "throughput":
            parts.append(self.reward)
        if self.ablate:
            parts.append(f"no-{self.ablate}")
        if self.hold is not None or self.train_hold is not None:
            from simspec.train.resps import INFERENCE_HOLD, TRAIN_HOLD

            parts.append(f"hold{self.hold or INFERENCE_HOLD}-{self.train_hold or TRAIN_HOLD}")
        return Path("policies") / "-".join(parts)


def total_work(request: TrainRequest) -> int:
    """Units of the progress bar: environment steps (PPO) or updates (RADAR)."""
    from simspec.train.ltd import LTD_PRESETS
    from simspec.train.radar import RADAR_PRESETS
    from simspec.train.resps import RESPS_PRESETS

    if request.algo == "ltd":
        return LTD_PRESETS[request.preset].steps_for(request.ablate)
    if request.algo == "resps":
        return RESPS_PRESETS[request.preset].steps
    return RADAR_PRESETS[request.preset].updates


@dataclass
class Fitted:
    """What a training run hands to the artifact writer."""

    policy: BatchPolicy
    spec: dict  # the inference configuration (``policy.json``'s "policy")
    arrays: dict[str, np.ndarray]  # the inference networks
    env_steps: int
    validation_speedup: float
    schedule: dict
    files: list[str]  # checkpoints written into the work folder, shipped beside the policy


def _fit(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Callable[[int], None],
         work: Path) -> Fitted:
    from dataclasses import asdict

    tensorboard = str(work / "tb")
    if request.algo == "ltd":
        from simspec.train.ltd import LTD_PRESETS, train_ltd

        schedule = LTD_PRESETS[request.preset]
        result = train_ltd(setting, schedule, log, advance, tensorboard, request.ablate)
        policy, files, arrays = result.policy, [], {}
        for part, model in (("size", result.size_model), ("depth", result.depth_model)):
            if model is not None:
                model.policy.save(work / f"{part}_policy.sb3")
                files.append(f"{part}_policy.sb3")
                arrays.update(getattr(policy, f"{part}_net").arrays(part))
        spec = {"width": policy.width, "depth_max": policy.depth_max, "sizes": result.sizes.tolist(),
                "size": setting.grid_size, "depth": setting.grid_depth,
                "has_depth_net": result.depth_model is not None, "has_size_net": result.size_model is not None}
        return Fitted(policy, spec, arrays, result.env_steps, result.validation_speedup,
                      {**asdict(schedule), "ablate": request.ablate}, files)
    if request.algo == "resps":
        from simspec.train.resps import RESPS_PRESETS, train_resps

        config = RESPS_PRESETS[request.preset]
        from simspec.train.resps import INFERENCE_HOLD, TRAIN_HOLD

        hold, train_hold = request.hold or INFERENCE_HOLD, request.train_hold or TRAIN_HOLD
        result = train_resps(setting, config, request.variant, log, advance, tensorboard, hold=hold,
                             train_hold=train_hold)
        result.model.policy.save(work / "resps_policy.sb3")
        policy = result.policy
        spec = {"width": policy.width, "depth_max": policy.depth_max, "actions": policy.actions.tolist(),
                "hold": policy.hold}
        schedule = {**asdict(config), "entropy": VARIANTS[request.variant], "variant": request.variant,
                    "train_hold": train_hold}
        return Fitted(policy, spec, policy.net.arrays("net"), result.model.num_timesteps, result.validation_speedup,
                      schedule, ["resps_policy.sb3"])
    from simspec.train.radar import RADAR_PRESETS, RADAR_TIMING_KEY, radar_call_seconds, train_radar

    config = RADAR_PRESETS[request.preset]
    # T_policy of RADAR's T_gen: from the profile when calibrate measured it (so that one seed
    # gives one policy); else the untrained network's decision time, measured now.
    per_call = (setting.profile.meta.get("policy_seconds") or {}).get(RADAR_TIMING_KEY)
    source = "profile"
    if per_call is None:
        per_call, source = radar_call_seconds(setting.width, setting.depth_max, setting.grid_size, config.hidden), \
            "measured during training (the profile has none: runs with one seed may differ)"
    result = train_radar(setting, config, log, advance, per_call)
    import torch  # imported late: a refused request answers before torch loads

    torch.save(result.net.state_dict(), work / "radar_lstm.pt")
    policy = result.policy
    spec = {"width": policy.width, "depth_max": policy.depth_max, "size": policy.size, "hidden": config.hidden}
    return Fitted(policy, spec, policy.net.arrays("lstm"), result.env_steps, result.validation_speedup,
                  {**asdict(config), "policy_seconds_per_call": per_call, "policy_seconds_source": source},
                  ["radar_lstm.pt"])


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
        fitted = _fit(request, setting, log, advance, work)
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
        static_seconds = (profile.meta.get("policy_seconds") or {}).get("static", 0.0)
        rows, oracle_row, _ = evaluate(setting.heldout, setting.cost, [policy, *baselines], setting.max_new_tokens,
                                       {policy.family: decision, "eagle3": static_seconds, "grid": static_seconds})
        learned, eagle3, grid_row = rows
        log.write_csv(work / "training.csv")
        meta = {
            "name": out.name, "algo": request.algo, "variant": request.variant if request.algo == "resps" else None,
            "preset": request.preset, "reward": request.reward, "seed": request.seed, "precision": precision,
            "ablate": request.ablate,
            "schedule": fitted.schedule,
            "policy": fitted.spec, "env_steps": env_steps, "train_seconds": train_seconds,
            "steps_per_second": env_steps / train_seconds,
            "machine": machine(),
            "profile": {"name": profile.directory.name, "path": str(profile.directory),
                        "inputs_hash": profile.meta["inputs_hash"], "device": profile.meta["device"],
                        "kind": profile.kind},
            "traces_hash": setting.train.meta.get("content_hash"), "dataset": setting.train.meta.get("dataset"),
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
