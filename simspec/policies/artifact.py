"""The learned-policy artifact ``policies/<name>/``, its one writer and one reader: ``policy.json``
(what the policy is and what made it) and ``policy.npz`` (the inference networks as plain arrays).
``training.csv``, ``tb/`` and the SB3 / torch checkpoints (``*.sb3``: ``ActorCriticPolicy.load``,
no optimizer state) sit beside them; nothing here reads them."""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from simspec import __version__
from simspec.cache import atomic_directory
from simspec.errors import SimspecError, read_json, require, require_schema
from simspec.policies.algorithms import LEARNED, learned
from simspec.policies.base import BatchPolicy
from simspec.schema import Artifact, Record
from simspec.shipped import locate

POLICY_SCHEMA, POLICY_VERSION = "simspec-policy", 1


@dataclass(frozen=True, kw_only=True)
class PolicySpec(Record):
    """``policy``: the inference configuration its algorithm builds the policy from (the tree
    shape here; each algorithm's own fields, declared with ``register_learned``, in ``raw``)."""

    width: int
    depth_max: int


@dataclass(frozen=True, kw_only=True)
class TrainedOn(Record):
    """``profile``: the profile the policy was trained on."""

    name: str | None = None
    path: str | None = None
    inputs_hash: str | None = None
    device: str | None = None
    kind: str | None = None  # measured, analytic or imported


@dataclass(frozen=True, kw_only=True)
class Validation(Record):
    """``validation``: the deployed policy's simulated speedup on validation prompts during training."""

    best_speedup: float | None = None
    grid_best_speedup: float | None = None
    curve: list | None = None


@dataclass(frozen=True, kw_only=True)
class HeldOut(Record):
    """``heldout``: the simulated scores on the held-out prompts at the end of training."""

    speedup: float | None = None
    grid_best_speedup: float | None = None
    eagle3_speedup: float | None = None
    oracle_share: float | None = None


@dataclass(frozen=True, kw_only=True)
class PolicyMeta(Artifact):
    """``policy.json``: what the policy is and what made it."""

    SCHEMA: ClassVar[str] = POLICY_SCHEMA
    VERSIONS: ClassVar[tuple[int, ...]] = (POLICY_VERSION,)
    algo: str
    policy: PolicySpec = field(metadata={"what": "an object (the policy's inference configuration)"})
    name: str | None = None
    preset: str | None = None
    reward: str = "throughput"
    seed: int | None = None
    train_seconds: float | None = None
    decision_seconds: float | None = None  # what the simulator charges per cycle
    profile: TrainedOn | None = None
    validation: Validation | None = None
    heldout: HeldOut | None = None
    traces_hash: str | None = None


class ProfileMismatch(UserWarning):
    """A policy is used with another profile than the one it was trained on."""


def build_policy(meta: PolicyMeta, arrays: dict[str, np.ndarray]) -> BatchPolicy:
    """The inference policy described by ``meta.policy`` with the networks in ``arrays``."""
    return learned(meta.algo).build(meta.policy.to_json(), arrays, meta.name or meta.algo)


def write_policy(directory: Path, meta: dict, arrays: dict[str, np.ndarray], extra_files: dict[str, Path] | None = None,
                 force: bool = False) -> Path:
    """Writes the artifact through a folder renamed into place at the end; ``extra_files``: name -> a
    file or folder to move in."""
    directory = Path(directory)
    if directory.exists() and not force:
        raise SimspecError(f"{directory} exists: choose another --out or pass --force")
    try:
        build_policy(PolicyMeta.of(meta), arrays)  # refuse to write what could not be read back
    except (KeyError, ValueError, TypeError, SimspecError) as exc:
        raise SimspecError(f"refusing to write policy {directory}: its networks are incomplete ({exc!r})") from None
    meta = {"schema": POLICY_SCHEMA, "schema_version": POLICY_VERSION, "simspec_version": __version__, **meta}
    with atomic_directory(directory, replace=force) as staging:
        np.savez(staging / "policy.npz", **arrays)
        (staging / "policy.json").write_text(json.dumps(meta, indent=1))
        for name, source in (extra_files or {}).items():
            shutil.move(str(source), str(staging / name))
    return directory


def retrain_advice(directory: Path, meta: dict | None = None) -> str:
    """How to make the policy in ``directory`` again (its algorithm and profile where ``meta`` says them)."""
    meta = meta if isinstance(meta, dict) else {}
    algo = meta.get("algo") if meta.get("algo") in LEARNED else "ALGO"
    source = meta.get("profile")
    profile = source.get("path") if isinstance(source, dict) and isinstance(source.get("path"), str) else "PROFILE"
    return (f"retrain it with `simspec train --simulated --profile {profile} --algo {algo} --out {directory} "
            "--force`")


def read_policy_meta(path: str | Path) -> tuple[Path, PolicyMeta]:
    directory = locate(path)
    if directory.name in ("policy.json", "policy.npz"):
        directory = directory.parent
    file = directory / "policy.json"
    blob = read_json(file, "policy file ", f"no policy at {directory} (missing policy.json): train one with "
                     f"`simspec train --simulated --profile PROFILE --algo ALGO --out {directory}`",
                     retrain_advice(directory))
    fix = retrain_advice(directory, blob)
    require_schema(blob, POLICY_SCHEMA, POLICY_VERSION, file, fix)
    if blob.get("algo") not in LEARNED:
        raise SimspecError(f"{file} names an unknown algorithm {blob.get('algo')!r}: {fix}")
    meta = PolicyMeta.parse(blob, file, fix)  # the schema was checked above, before the algorithm
    for name, kind in learned(meta.algo).fields.items():  # the algorithm's own inference fields
        require(meta.policy.raw, name, kind, file, fix, name=f"policy.{name}")
    return directory, meta


def load_policy(path: str | Path, profile_hash: str | None = None) -> tuple[BatchPolicy, PolicyMeta]:
    """The policy in ``path`` and its metadata; a ``ProfileMismatch`` warning when ``profile_hash`` is
    not the profile it was trained on."""
    directory, meta = read_policy_meta(path)
    weights = directory / "policy.npz"
    try:
        with open(weights, "rb") as handle, np.load(handle) as blob:  # closed even when the zip is bad
            arrays = {k: blob[k] for k in blob.files}
        policy = build_policy(meta, arrays)
    except FileNotFoundError:
        raise SimspecError(f"policy {directory} has no policy.npz (its weights): "
                           f"{retrain_advice(directory, meta.to_json())}") from None
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise SimspecError(f"policy weights {weights} are unreadable or incomplete "
                           f"({exc.__class__.__name__}: {exc}): {retrain_advice(directory, meta.to_json())}") from None
    trained_on = meta.profile or TrainedOn()
    if profile_hash is not None and trained_on.inputs_hash != profile_hash:
        warnings.warn(f"policy {directory.name} was trained on profile {trained_on.name} "
                      f"({trained_on.inputs_hash}), not on this one ({profile_hash}): its choices were tuned for other "
                      "latencies; retrain it on this profile for a fair result", ProfileMismatch, stacklevel=2)
    policy.family = f"policy:{directory.name}"
    return policy, meta
