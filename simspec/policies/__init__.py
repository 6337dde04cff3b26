"""Decision policies for speculative decoding, shared by the simulator and the real engine."""

from simspec.policies.base import (
    BuiltTree,
    CycleOutcome,
    CycleStart,
    DraftPlan,
    DraftStep,
    Policy,
    StaticPolicy,
    eagle3_default,
    tree_capacity,
)

__all__ = [
    "BuiltTree",
    "CycleOutcome",
    "CycleStart",
    "DraftPlan",
    "DraftStep",
    "Policy",
    "StaticPolicy",
    "eagle3_default",
    "tree_capacity",
]
