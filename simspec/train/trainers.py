"""The learned-algorithm registry, training side: for each ``--algo``, how much work a request
is (the progress bar's units) and how it trains into what the policy artifact holds. The name
must also be registered for inference (``simspec.policies.algorithms``: how a folder is read).

    @register_trainer("ltd", work=lambda request: ...)
    def ltd(request, setting, log, advance, work_dir) -> Fitted: ...

The built-ins (LTD, Re-SpS, RADAR) register below; their training code stays in ltd.py,
resps.py and radar.py, imported when a run starts (torch loads only then)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simspec.policies.base import BatchPolicy
from simspec.registry import Registry

if TYPE_CHECKING:
    from simspec.train.log import TrainingLog
    from simspec.train.run import TrainRequest
    from simspec.train.setting import Setting

Advance = Callable[[int], None]


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


@dataclass(frozen=True)
class TrainerSpec:
    name: str
    work: Callable[[TrainRequest], int]  # units of the progress bar: environment steps or updates
    fit: Callable[[TrainRequest, Setting, TrainingLog, Advance, Path], Fitted]


TRAINERS: Registry[TrainerSpec] = Registry("trainer", ("simspec.train.trainers",))


def register_trainer(name: str, *, work: Callable[[TrainRequest], int]):
    """Decorator: registers ``fit(request, setting, log, advance, work_dir) -> Fitted`` for ``name``."""
    def decorate(fit: Callable[[TrainRequest, Setting, TrainingLog, Advance, Path], Fitted]):
        TRAINERS.add(name, TrainerSpec(name, work, fit))
        return fit
    return decorate


def trainer(name: str) -> TrainerSpec:
    return TRAINERS.get(name, lambda n: f"--algo {n!r} has no trainer registered (simspec.train.trainers)")


# --- the built-in algorithms -----------------------------------------------------------------
def _ltd_work(request: TrainRequest) -> int:
    from simspec.train.ltd import LTD_PRESETS

    return LTD_PRESETS[request.preset].steps_for(request.ablate)


@register_trainer("ltd", work=_ltd_work)
def _ltd(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Advance, work: Path) -> Fitted:
    from simspec.train.ltd import LTD_PRESETS, train_ltd

    schedule = LTD_PRESETS[request.preset]
    result = train_ltd(setting, schedule, log, advance, str(work / "tb"), request.ablate)
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


def _resps_work(request: TrainRequest) -> int:
    from simspec.train.resps import RESPS_PRESETS

    return RESPS_PRESETS[request.preset].steps


@register_trainer("resps", work=_resps_work)
def _resps(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Advance, work: Path) -> Fitted:
    from simspec.train.resps import INFERENCE_HOLD, RESPS_PRESETS, TRAIN_HOLD, train_resps
    from simspec.train.setting import VARIANTS

    config = RESPS_PRESETS[request.preset]
    hold, train_hold = request.hold or INFERENCE_HOLD, request.train_hold or TRAIN_HOLD
    result = train_resps(setting, config, request.variant, log, advance, str(work / "tb"), hold=hold,
                         train_hold=train_hold)
    result.model.policy.save(work / "resps_policy.sb3")
    policy = result.policy
    spec = {"width": policy.width, "depth_max": policy.depth_max, "actions": policy.actions.tolist(),
            "hold": policy.hold}
    schedule = {**asdict(config), "entropy": VARIANTS[request.variant], "variant": request.variant,
                "train_hold": train_hold}
    return Fitted(policy, spec, policy.net.arrays("net"), result.model.num_timesteps, result.validation_speedup,
                  schedule, ["resps_policy.sb3"])


def _radar_work(request: TrainRequest) -> int:
    from simspec.train.radar import RADAR_PRESETS

    return RADAR_PRESETS[request.preset].updates


@register_trainer("radar", work=_radar_work)
def _radar(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Advance, work: Path) -> Fitted:
    from simspec.train.radar import RADAR_PRESETS, RADAR_TIMING_KEY, radar_call_seconds, train_radar

    config = RADAR_PRESETS[request.preset]
    # T_policy of RADAR's T_gen: from the profile when calibrate measured it (so that one seed
    # gives one policy); else the untrained network's decision time, measured now.
    per_call = (setting.profile.meta.policy_seconds or {}).get(RADAR_TIMING_KEY)
    source = "profile"
    if per_call is None:
        per_call, source = radar_call_seconds(setting.width, setting.depth_max, setting.grid_size, config.hidden), \
            "measured during training (the profile has none: runs with one seed may differ)"
    result = train_radar(setting, config, log, advance, per_call, str(work / "tb"))
    import torch  # imported late: a refused request answers before torch loads

    torch.save(result.net.state_dict(), work / "radar_lstm.pt")
    policy = result.policy
    spec = {"width": policy.width, "depth_max": policy.depth_max, "size": policy.size, "hidden": config.hidden}
    return Fitted(policy, spec, policy.net.arrays("lstm"), result.env_steps, result.validation_speedup,
                  {**asdict(config), "policy_seconds_per_call": per_call, "policy_seconds_source": source},
                  ["radar_lstm.pt"])
