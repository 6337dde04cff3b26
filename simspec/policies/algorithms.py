"""The learned-algorithm registry, inference side (numpy only): every ``--algo`` a policy folder can
name, what its ``policy.json`` "policy" object must hold, and how its policy is built from that and
``policy.npz``. The training side registers in ``simspec.train.trainers`` under the same name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simspec.policies.base import BatchPolicy
from simspec.registry import Registry


@dataclass(frozen=True)
class LearnedSpec:
    name: str
    help: str  # the phrase --algo's help gives it
    build: Callable[[dict, dict[str, np.ndarray], str], BatchPolicy]
    fields: dict[str, type] = field(default_factory=dict)  # policy.json's "policy" beyond width and depth_max


LEARNED: Registry[LearnedSpec] = Registry("algorithm", ("simspec.policies.learned",))


def register_learned(name: str, *, help: str, fields: dict[str, type] | None = None):
    """Decorator: registers ``build(spec, arrays, name) -> BatchPolicy`` as the algorithm ``name``."""
    def decorate(build: Callable[[dict, dict[str, np.ndarray], str], BatchPolicy]):
        LEARNED.add(name, LearnedSpec(name, help, build, dict(fields or {})))
        return build
    return decorate


def algo_names() -> tuple[str, ...]:
    return LEARNED.names()


def learned(name: str) -> LearnedSpec:
    return LEARNED.get(name, lambda n: f"unknown --algo {n!r}: choose from {', '.join(algo_names())}")


def algos_help() -> str:
    """``--algo``'s help: every algorithm with its phrase."""
    phrases = [f"{s.name} ({s.help})" for s in LEARNED.specs()]
    return ", ".join(phrases[:-1]) + " or " + phrases[-1] + "." if len(phrases) > 1 else phrases[0] + "."
