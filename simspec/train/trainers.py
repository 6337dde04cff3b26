"""The learned-algorithm registry, training side: for each ``--algo``, its work (the progress bar's
units), how it trains into a policy artifact, its own options (``train``'s flags for it alone) and
precisions. The name is also registered for inference (``simspec.policies.algorithms``).

    @dataclass(frozen=True, kw_only=True)
    class MyOptions(AlgorithmOptions):
        budget: int = opt(8, "my-algo only: ...", min=1)

    @register_trainer("my-algo", work=lambda request: ..., options=MyOptions)
    def fit(request, setting, log, advance, work_dir) -> Fitted: ...  # reads request.options.budget

The built-ins register below; their code (ltd.py, resps.py, radar.py, torch) loads when a run starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.policies.base import BatchPolicy
from simspec.registry import Registry
from simspec.train.setting import ABLATIONS, VARIANTS

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


@dataclass(frozen=True, kw_only=True)
class AlgorithmOptions:
    """An algorithm's own options: a frozen, keyword-only dataclass of ``train``'s flags for it alone
    (``simspec.flags.opt``); the hooks shape the run's name and record."""

    def check(self) -> None:
        """One line (``SimspecError``) for a value out of its range."""

    def label(self, algo: str) -> str:
        """The default policy folder's first part."""
        return algo

    def name_parts(self) -> list[str]:
        """Parts the default policy folder's name gains (after the preset and reward)."""
        return []

    def meta(self) -> dict:
        """What ``policy.json`` records of them."""
        return asdict(self)


@dataclass(frozen=True)
class TrainerSpec:
    name: str
    work: Callable[[TrainRequest], int]  # units of the progress bar: environment steps or updates
    fit: Callable[[TrainRequest, Setting, TrainingLog, Advance, Path], Fitted]
    options: type = AlgorithmOptions  # its own flags (none: the base class)
    precisions: tuple[str, ...] = ("fp32", "bf16")  # what --precision may ask of it
    auto_precision: Callable[[], str] = lambda: "fp32"  # --precision auto
    uses_torch: bool = True  # False: a numpy trainer, whose runs never load torch (seconds at every start)


TRAINERS: Registry[TrainerSpec] = Registry("trainer", ("simspec.train.trainers",))


def register_trainer(name: str, *, work: Callable[[TrainRequest], int], options: type = AlgorithmOptions,
                     precisions: tuple[str, ...] = ("fp32", "bf16"),
                     auto_precision: Callable[[], str] = lambda: "fp32", uses_torch: bool = True):
    """Decorator: registers ``fit(request, setting, log, advance, work_dir) -> Fitted`` for ``name``."""
    def decorate(fit: Callable[[TrainRequest, Setting, TrainingLog, Advance, Path], Fitted]):
        TRAINERS.add(name, TrainerSpec(name, work, fit, options, tuple(precisions), auto_precision, uses_torch))
        return fit
    return decorate


def trainer(name: str) -> TrainerSpec:
    return TRAINERS.get(name, lambda n: f"--algo {n!r} has no trainer registered (simspec.train.trainers)")


def algorithm_options() -> dict[str, type]:
    """Every trainer's options class (``train``'s flags for each ``--algo``)."""
    return {spec.name: spec.options for spec in TRAINERS.specs()}


# --- the built-in algorithms -----------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LTDOptions(AlgorithmOptions):
    ablate: str | None = opt(None, "LTD only, the paper's ablations: size (no size policy: the best static V every "
                             "cycle), depth (no depth policy: the best static depth) or rounds (no co-adaptation "
                             "rounds).")

    def check(self) -> None:
        if self.ablate is not None and self.ablate not in ABLATIONS:
            raise SimspecError(f"--ablate takes one of {', '.join(ABLATIONS)}, not {self.ablate!r}")

    def name_parts(self) -> list[str]:
        return [f"no-{self.ablate}"] if self.ablate else []


def _ltd_precision() -> str:
    """bf16 for LTD's wide networks where this CPU has native bf16 (faster updates)."""
    from simspec.engine.models import native_bf16

    return "bf16" if native_bf16() else "fp32"


def _ltd_work(request: TrainRequest) -> int:
    from simspec.train.ltd import LTD_PRESETS

    return LTD_PRESETS[request.preset].steps_for(request.options.ablate)


@register_trainer("ltd", work=_ltd_work, options=LTDOptions, auto_precision=_ltd_precision)
def _ltd(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Advance, work: Path) -> Fitted:
    from simspec.train.ltd import LTD_PRESETS, train_ltd

    schedule = LTD_PRESETS[request.preset]
    result = train_ltd(setting, schedule, log, advance, str(work / "tb"), request.options.ablate)
    policy, files, arrays = result.policy, [], {}
    for part, model in result.models.items():
        if model is not None:
            model.policy.save(work / f"{part}_policy.sb3")
            files.append(f"{part}_policy.sb3")
            arrays.update(getattr(policy, f"{part}_net").arrays(part))
    spec = {"width": policy.width, "depth_max": policy.depth_max, "sizes": policy.sizes.tolist(),
            "size": setting.grid_size, "depth": setting.grid_depth,
            "has_depth_net": result.models["depth"] is not None, "has_size_net": result.models["size"] is not None}
    return Fitted(policy, spec, arrays, result.env_steps, result.validation_speedup,
                  {**asdict(schedule), "ablate": request.options.ablate}, files)


@dataclass(frozen=True, kw_only=True)
class ReSpSOptions(AlgorithmOptions):
    variant: str = opt("standard", "Re-SpS only: standard or maxent (entropy coefficient 0.1).")
    hold: int | None = opt(None, "Re-SpS only: cycles the deployed policy holds an action (the paper's N, 30 by "
                           "default).")
    train_hold: int | None = opt(None, "Re-SpS only: cycles an action is held in training (10 by default).")
    top_k: str = opt("width", "Re-SpS only: width (each node keeps the traces' width of children) or choose (the "
                     "policy picks k per interval, the paper's top-k, within the recorded trees: sampled traces "
                     "only).")

    def check(self) -> None:
        if self.variant not in VARIANTS:
            raise SimspecError(f"unknown --variant {self.variant!r}: choose from {', '.join(VARIANTS)}")
        if self.top_k not in ("width", "choose"):
            raise SimspecError(f"--top-k takes width or choose, not {self.top_k!r}")
        for flag, value in (("--hold", self.hold), ("--train-hold", self.train_hold)):
            if value is not None and value < 1:
                raise SimspecError(f"{flag} takes a number of cycles >= 1, got {value}")

    def label(self, algo: str) -> str:
        return algo + ("-maxent" if self.variant == "maxent" else "")

    def name_parts(self) -> list[str]:
        parts = ["topk"] if self.top_k == "choose" else []
        if self.hold is None and self.train_hold is None:
            return parts
        from simspec.train.resps import INFERENCE_HOLD, TRAIN_HOLD

        return parts + [f"hold{self.hold or INFERENCE_HOLD}-{self.train_hold or TRAIN_HOLD}"]


def _resps_work(request: TrainRequest) -> int:
    from simspec.train.resps import RESPS_PRESETS

    return RESPS_PRESETS[request.preset].steps


@register_trainer("resps", work=_resps_work, options=ReSpSOptions)
def _resps(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Advance, work: Path) -> Fitted:
    from simspec.train.resps import INFERENCE_HOLD, RESPS_PRESETS, TRAIN_HOLD, train_resps

    config, options = RESPS_PRESETS[request.preset], request.options
    hold, train_hold = options.hold or INFERENCE_HOLD, options.train_hold or TRAIN_HOLD
    if options.top_k == "choose" and not setting.fit.sampled:
        raise SimspecError("--top-k choose prunes the recorded trees, which only sampled traces hold (T > 0): "
                           "train on a T > 0 profile, or leave --top-k at width")
    result = train_resps(setting, config, options.variant, log, advance, str(work / "tb"), hold=hold,
                         train_hold=train_hold, children=options.top_k == "choose")
    result.models["resps"].policy.save(work / "resps_policy.sb3")
    policy = result.policy
    spec = {"width": policy.width, "depth_max": policy.depth_max, "actions": policy.actions.tolist(),
            "hold": policy.hold}
    schedule = {**asdict(config), "entropy": VARIANTS[options.variant], "variant": options.variant,
                "train_hold": train_hold, "top_k": options.top_k}
    return Fitted(policy, spec, policy.net.arrays("net"), result.env_steps, result.validation_speedup,
                  schedule, ["resps_policy.sb3"])


@dataclass(frozen=True, kw_only=True)
class RadarOptions(AlgorithmOptions):
    returns: str = opt("expected", "RADAR only, at T > 0: an episode's return from the tree's expected accepted "
                       "length (expected) or from one draw of its acceptance-length law (sampled, the paper's data).")

    def check(self) -> None:
        if self.returns not in ("expected", "sampled"):
            raise SimspecError(f"--returns takes expected or sampled, not {self.returns!r}")

    def name_parts(self) -> list[str]:
        return ["sampled"] if self.returns == "sampled" else []


def _radar_work(request: TrainRequest) -> int:
    from simspec.train.radar import RADAR_PRESETS

    return RADAR_PRESETS[request.preset].updates


@register_trainer("radar", work=_radar_work, options=RadarOptions, precisions=("fp32",))  # its LSTM trains in fp32
def _radar(request: TrainRequest, setting: Setting, log: TrainingLog, advance: Advance, work: Path) -> Fitted:
    from simspec.train.radar import RADAR_PRESETS, RADAR_TIMING_KEY, radar_call_seconds, train_radar

    config = RADAR_PRESETS[request.preset]
    # T_policy of RADAR's T_gen: the profile's (so that one seed gives one policy), else measured now
    per_call, source = (setting.profile.meta.policy_seconds or {}).get(RADAR_TIMING_KEY), "profile"
    if per_call is None:
        per_call, source = radar_call_seconds(setting.width, setting.depth_max, setting.grid_size, config.hidden), \
            "measured during training (the profile has none: runs with one seed may differ)"
    returns = request.options.returns if setting.fit.sampled else "expected"  # at T = 0 the two are one
    result = train_radar(setting, config, log, advance, per_call, str(work / "tb"), returns)
    import torch  # imported late: a refused request answers before torch loads

    torch.save(result.models["lstm"].state_dict(), work / "radar_lstm.pt")
    policy = result.policy
    spec = {"width": policy.width, "depth_max": policy.depth_max, "size": policy.size, "hidden": config.hidden}
    return Fitted(policy, spec, policy.net.arrays("lstm"), result.env_steps, result.validation_speedup,
                  {**asdict(config), "policy_seconds_per_call": per_call, "policy_seconds_source": source,
                   "returns": returns},
                  ["radar_lstm.pt"])
