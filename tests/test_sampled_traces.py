"""Recording at temperature > 0 on a tiny real Llama (random weights, see conftest.py): each
stored node's probability is the target's, computed again by plain forwards; and the
accepted-length law the traces give a cycle is the law of the live engine's cycle there,
tested statistically, with the test's power shown on a wrong law."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import FAIL, PASS, g_test
from helpers import TINY_PROMPT as PROMPT

from simspec.engine.sampling import Sampling, distribution
from simspec.measure.recorder import RecordSpec, TraceRecorder
from simspec.sim.traces import assemble

DEPTH_MAX, WIDTH, NODES = 4, 2, 6


def recorded(tiny, drafter, sampling: Sampling, new_tokens: int, seed: int):
    spec = RecordSpec(DEPTH_MAX, WIDTH, new_tokens, sampling, NODES)
    trace = TraceRecorder(tiny, drafter, spec).record_sampled(PROMPT, np.random.default_rng(seed))
    meta = {"depth_max": DEPTH_MAX, "width": WIDTH, "temperature": sampling.temperature, "nodes": NODES}
    return assemble([trace], [len(PROMPT)], meta)


@pytest.mark.parametrize("draft, sampling", [("lm", Sampling(1.0)), ("eagle3", Sampling(0.7, top_p=0.9))])
def test_recorded_node_probabilities_are_the_targets(draft, sampling, tiny, drafters):
    traces = recorded(tiny, drafters[draft], sampling, 10, seed=3)
    continuation = list(traces.tokens)
    checked = 0
    for p in range(traces.positions):
        real = np.flatnonzero(traces.node_depth[p] <= DEPTH_MAX)
        parent, token, prob = traces.node_parent[p], traces.node_token[p], traces.node_prob[p]
        for k in real[1:]:
            path, node = [], int(parent[k])
            while node > 0:  # the parent's path below the root
                path.append(int(token[node]))
                node = int(parent[node])
            context = PROMPT + continuation[:p + 1] + path[::-1]
            with torch.inference_mode():
                logits = tiny.model(torch.tensor([context])).logits[0, -1]
            assert prob[k] == pytest.approx(distribution(logits, sampling)[token[k]], abs=2e-5), (p, k)
            checked += 1
    assert checked > 20


class PrunedPolicy:
    """A static tree whose verified nodes keep only their best ``k`` children (Re-SpS's top-k)."""

    def __new__(cls, k: int):
        from simspec.policies.base import StaticPolicy

        class Pruned(StaticPolicy):
            def children_batch(self, rows):
                return np.full(len(rows), k)

        return Pruned(DEPTH_MAX, WIDTH, NODES)


def law_of(traces, k: int | None) -> np.ndarray:
    """P(accepted = a) of the first cycle's (DEPTH_MAX, NODES) tree, pruned to each node's ``k`` best children."""
    at, depth, size = np.array([0]), np.array([DEPTH_MAX]), np.array([NODES])
    if k is None:
        return traces.accepted_distribution(at, depth, size)[0]
    tail = traces.pruned_tails(at, depth, size, np.array([k]))[1][0].astype(np.float64)
    return tail - np.append(tail[1:], 0.0)


@pytest.mark.parametrize("k", [None, 1], ids=["top-v", "top-k-1"])
def test_recorded_acceptance_law_is_the_live_engines(k, tiny, drafters):
    """Unpruned, the wrong law is a smaller tree's; pruned to each node's best child, the unpruned
    tree's law: the test tells the two apart."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    sampling = Sampling(1.0)
    with torch.inference_mode():  # the likeliest first token: the most engine runs start there
        root = int(tiny.model(torch.tensor([PROMPT])).logits[0, -1].argmax())
    traces = next(t for t in (recorded(tiny, drafters["lm"], sampling, 4, seed) for seed in range(50))
                  if t.tokens[0] == root)
    # Eight sequences a forward, each row its own generator: a seed's draws are the same at any batch size.
    engine = SpeculativeEngine(tiny, drafters["lm"], sampling, batch_size=8)
    counts, n = {}, 0
    # The first cycle, wherever the engine's first token is the trace's root. Two new tokens (the
    # prefill's, then at least one from the first cycle) run exactly that cycle: a cycle drafts
    # and verifies its whole tree whatever the token budget left, so a longer generation only
    # adds cycles after it (the same seeds give the same first cycles).
    policy = StaticPolicy(DEPTH_MAX, WIDTH, NODES) if k is None else PrunedPolicy(k)
    for run in engine.decode([PROMPT] * 600, policy, 2, range(600)).generations:
        if run.tokens[0] == root and run.cycles:
            counts[run.cycles[0].accepted] = counts.get(run.cycles[0].accepted, 0) + 1
            n += 1
    assert n > 200
    law = law_of(traces, k)
    assert g_test(counts, {a: law[a] for a in range(DEPTH_MAX) if law[a] > 0}, n) > PASS
    wrong = traces.accepted_distribution(np.array([0]), np.array([DEPTH_MAX - 1]), np.array([2]))[0] \
        if k is None else law_of(traces, None)
    assert g_test(counts, {a: wrong[a] for a in range(DEPTH_MAX) if wrong[a] > 0}, n) < FAIL
