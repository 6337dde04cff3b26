"""Decision policies for speculative decoding, shared by the simulator and the real engine."""

from simspec.policies.base import BatchPolicy, DraftPlan, StaticPolicy, eagle3_default, tree_capacity

__all__ = ["BatchPolicy", "DraftPlan", "StaticPolicy", "eagle3_default", "tree_capacity"]
