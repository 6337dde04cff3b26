"""``simspec tune``'s Sequoia tree (any shape) and the settings of the engines that can take one,
as rank paths (numpy only): EAGLE-1's ``tree_choices`` (any tree); vLLM's ``speculative_token_tree``
with ``num_speculative_tokens`` = its nodes, for trees whose nodes of each level all have the same
number of children; SGLang drafts top-k beam trees only.
"""

from __future__ import annotations

import json

import numpy as np

from simspec.policies.rules.sequoia import SequoiaTree, sequoia_shape, split_acceptance
from simspec.policies.shape import TreeShape
from simspec.sim.replay import mean_speedup, replay


def settings(shape: TreeShape, engine: str, draft: str) -> tuple[dict | None, str]:
    """(the engine's settings for this tree or None, one line to paste or why it cannot)."""
    choices = shape.choices()
    if engine == "eagle":
        return {"ea_model_path": draft, "tree_choices": choices}, f"EAGLE-1 static tree: tree_choices={choices}"
    if engine == "vllm":
        if shape.branching() is None:
            return None, ("vLLM cannot take this tree: its tree drafting needs every node of a level to have the "
                          "same number of children")
        s = {"method": "eagle3", "model": draft, "num_speculative_tokens": shape.size - 1,
             "speculative_token_tree": str([tuple(c) for c in choices])}
        return s, f"--speculative-config '{json.dumps(s)}' (tree attention backend)"
    if engine == "sglang":
        return None, "SGLang cannot take a tree of fixed shape: it drafts top-k beam trees (its flags above)"
    return {"tree": choices}, json.dumps({"tree": choices})


def sequoia_summary(train, held, cost, depth_max: int, max_new_tokens: int | None, engine: str, draft: str,
                    by_depth: bool = False) -> dict:
    """Sequoia's tree from the train split's acceptance by rank and ``cost``, scored on ``held``."""
    p = split_acceptance(train, by_depth)
    shape, model = sequoia_shape(p, cost, int(np.median(train.context_length)), depth_max)
    policy, (engine_settings, line) = SequoiaTree(shape), settings(shape, engine, draft)
    return {"nodes": shape.size, "depth": shape.depth, "per_level": np.bincount(shape.depths)[1:].tolist(),
            "tree": shape.choices(), "acceptance_by_rank": [round(float(x), 4) for x in p[0, :8]],
            "expected_tokens": model["expected_tokens"],
            "speedup": mean_speedup(replay(held, cost, policy, max_new_tokens)),
            "speedup_train": mean_speedup(replay(train, cost, policy, max_new_tokens)),
            "settings": engine_settings, "flags": line}
