"""Seed 003's token-cache FSM and Q-learning agent, and the classifier stopping rules
(SpecDec++, Disco), on crafted inputs where the right decision is known. numpy only."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEPTH_MAX, cost_model

from simspec.policies.base import count_cache_hits, drafted_depths
from simspec.policies.baselines import PaperQLearning, TokenCacheFSM
from simspec.policies.stopping import N_FEATURES, AcceptancePredictor, DiscoStop, SpecDecPP, step_features
from simspec.sim.labels import acceptance_examples, fit_predictor
from simspec.sim.replay import replay
from simspec.sim.traces import NO_NODE, PromptTrace, assemble

ROW = np.zeros(1, dtype=np.int64)


def observe(policy, depth: int, accepted: int, hits: int | None = None) -> None:
    extra = {} if hits is None else {"hits": np.array([hits])}
    policy.observe_batch(ROW, np.array([depth]), np.array([60]), np.array([accepted]), **extra)


def planned(policy) -> int:
    return int(policy.plan_batch(ROW, np.array([256]))[0][0])


# --- the token-cache FSM ---------------------------------------------------------------------------

def test_token_cache_fsm_moves_by_the_papers_rules():
    fsm = TokenCacheFSM(width=2, max_depth=8, size=16, start_depth=4)
    fsm.reset_batch(1)
    observe(fsm, 4, accepted=3, hits=1)  # a cached token accepted (+1), every draft accepted (+1)
    assert planned(fsm) == 6
    observe(fsm, 6, accepted=2, hits=2)  # cached, not all: +1
    assert planned(fsm) == 7
    observe(fsm, 7, accepted=6, hits=0)  # all accepted (+1) but none cached (-1): held
    assert planned(fsm) == 7
    observe(fsm, 7, accepted=1, hits=0)  # none cached: -1
    assert planned(fsm) == 6
    for _ in range(10):
        observe(fsm, 6, accepted=0, hits=0)
    assert planned(fsm) == 2  # saturates at one draft step
    for _ in range(10):
        observe(fsm, 2, accepted=1, hits=1)
    assert planned(fsm) == 8  # and at the depth budget
    with pytest.raises(ValueError):
        observe(fsm, 4, accepted=1)  # without hits the rule cannot decide


def cache_traces(prompt: list[int], continuation: list[int], reach: int = DEPTH_MAX - 1):
    """One prompt whose greedy path is in every tree down to ``reach`` levels (rank 0 each)."""
    levels, n = DEPTH_MAX - 1, len(continuation) - 1
    ranks = np.full((n, levels, levels), NO_NODE, dtype=np.int16)
    for j in range(1, reach + 1):
        ranks[:, j - 1, j - 1:] = j - 1
    trace = PromptTrace(np.array(continuation), len(prompt) + np.arange(n, dtype=np.int32), ranks,
                        np.zeros((n, levels, 4), np.float16), np.zeros((n, levels, 2), np.float16), False)
    return assemble([trace], [prompt], {"depth_max": DEPTH_MAX, "width": 2, "prompt_ids": ["p"]})


def test_cache_hits_count_accepted_tokens_already_in_the_prompt_or_committed():
    traces = cache_traces([5, 6, 7], [9, 5, 9, 8, 8, 1, 6])
    # Root 0 (token 9): accepting 3 drafts commits 5 (in the prompt), 9 (committed at the root),
    # 8 (new): 2 hits. Root 3 (token 8): 8 (committed just before), 1 (new): 1 hit.
    assert traces.cache_hits(np.array([0, 3, 1]), np.array([3, 2, 0])).tolist() == [2, 1, 0]
    # The engine counts the same from the tokens each cycle commits, one by one.
    cache = {5, 6, 7, 9}  # the prompt and the prefill's token
    assert count_cache_hits(cache, [5, 9, 8, 8], 3) == 2  # 3 accepted + the bonus 8
    assert count_cache_hits(cache, [1, 6], 1) == 0  # 1 is new
    assert count_cache_hits(cache, [8, 1, 2], 2) == 2


def test_token_cache_fsm_goes_deep_on_repetition_and_shallow_on_new_text():
    repeating = cache_traces([1, 2, 3], [1, 2, 3] * 12)  # every token repeats the prompt, all accepted
    novel = cache_traces([1, 2, 3], list(range(10, 46)), reach=0)  # new tokens, nothing accepted
    cost = cost_model()
    deep = replay(repeating, cost, TokenCacheFSM(width=2, max_depth=DEPTH_MAX, size=40, start_depth=3))
    shallow = replay(novel, cost, TokenCacheFSM(width=2, max_depth=DEPTH_MAX, size=40, start_depth=4))
    assert deep.tau[0] > DEPTH_MAX - 1.5  # reached the depth budget and stayed there
    # Depth 4 (3 draft calls), then 3 (2 calls), then 2 (1 call) on every cycle after.
    assert shallow.draft_calls[0] == shallow.cycles[0] + 3


def test_traces_without_prompt_tokens_refuse_token_cache_rules():
    traces = cache_traces([1, 2, 3], [4, 5, 6])
    lengths_only = assemble([PromptTrace(traces.tokens, traces.context_length, traces.path_rank, traces.level_scores,
                                         traces.best_child_logprobs, False)], [3], traces.meta.to_json())
    assert not lengths_only.has_prompt_tokens
    with pytest.raises(Exception, match="no prompt tokens"):
        replay(lengths_only, cost_model(), TokenCacheFSM(width=2, max_depth=DEPTH_MAX, size=8))
    # Stored prompt tokens travel with a subset and stay out of the content hash.
    assert traces.content_hash() == lengths_only.content_hash()
    assert traces.subset(np.array([0])).prompt_tokens.tolist() == [1, 2, 3]


# --- seed 003's Q-learning agent ------------------------------------------------------------------

def test_paper_qlearning_updates_its_table_by_one_step_q_learning():
    cost = cost_model()
    agent = PaperQLearning(cost, context=100, epsilon=0.0, lr=0.5, discount=0.9, width=2, max_depth=6, size=8,
                           start_depth=4)
    agent.reset_batch(1)
    optimistic = agent.q[0, 0, 0, 0]
    assert np.all(agent.q == optimistic) and optimistic == pytest.approx(max(d / agent.cycle_steps[d - 2]
                                                                             for d in range(2, 7)) / 0.1)
    assert planned(agent) == 3  # a uniform table: argmax picks the first move, -1
    observe(agent, 3, accepted=2)  # everything accepted: outcome "all"
    reward = 3 / agent.cycle_steps[3 - 2]  # tokens per cycle over the cycle's length in plain steps
    expected = optimistic + 0.5 * (reward + 0.9 * optimistic - optimistic)
    assert agent.q[0, 4 - 2, 1, 0] == pytest.approx(expected)  # state (D 4, "some"), move -1
    assert agent.outcome[0] == 2
    # The move just judged now looks worse than the untried ones: the next visit tries move 0.
    agent.depth[0], agent.outcome[0] = 4, 1
    assert planned(agent) == 4
    q_before, best_next = agent.q[0, 2, 1, 1], agent.q[0, 2, 1].max()  # next state: (D 4, "some") again
    observe(agent, 4, accepted=1)
    assert agent.q[0, 2, 1, 1] == pytest.approx(q_before + 0.5 * (2 / agent.cycle_steps[2] + 0.9 * best_next
                                                                   - q_before))


def test_paper_qlearning_learns_to_draft_deep_when_everything_is_accepted():
    traces = cache_traces([1, 2, 3], list(range(200)))  # every tree accepted to its full depth
    agent = PaperQLearning(cost_model(), context=100, epsilon=0.1, width=2, max_depth=DEPTH_MAX, size=40)
    result = replay(traces, cost_model(), agent)
    assert result.tau[0] > 4.0  # starts at D 4 (3 tokens per cycle) and learns to go deeper


# --- classifier stopping rules ----------------------------------------------------------------------

class Fixed:
    """A predictor whose acceptance probability is set per depth (levels, root included)."""

    def __init__(self, by_depth: dict[int, float]) -> None:
        self.by_depth, self.depth = by_depth, 2

    def predict(self, features: np.ndarray) -> np.ndarray:
        depth = np.rint(features[:, -1] * DEPTH_MAX + 1).astype(int)
        return np.array([self.by_depth[int(d)] for d in depth])


def drafted(policy, planned_depth: int = DEPTH_MAX) -> int:
    policy.reset_batch(1)
    depth, _ = policy.plan_batch(ROW, np.array([100]))
    frontier = np.log(np.array([[0.5, 0.2, 0.1, 0.05]], dtype=np.float32))
    return int(drafted_depths(policy, ROW, np.minimum(depth, planned_depth),
                              lambda idx, d: np.repeat(frontier, len(idx), 0))[0])


def test_specdecpp_stops_when_the_predicted_chance_of_a_rejection_passes_its_threshold():
    p = Fixed({d: 0.9 for d in range(2, DEPTH_MAX + 1)})  # all accepted: 0.9, 0.81, 0.729, ...
    assert drafted(SpecDecPP(p, 0.25, width=2, max_depth=DEPTH_MAX, size=8)) == 4  # 0.729 < 0.75: stop at 4
    assert drafted(SpecDecPP(p, 0.5, width=2, max_depth=DEPTH_MAX, size=8)) == 6  # 0.59 >= 0.5 to the budget
    assert drafted(SpecDecPP(p, 0.05, width=2, max_depth=DEPTH_MAX, size=8)) == 2


def test_disco_stops_at_the_first_token_predicted_below_its_threshold():
    p = Fixed({2: 0.9, 3: 0.8, 4: 0.3, 5: 0.9, 6: 0.9})  # depth 4's token looks bad, later ones good again
    assert drafted(DiscoStop(p, 0.5, width=2, max_depth=DEPTH_MAX, size=8)) == 4
    assert drafted(DiscoStop(p, 0.85, width=2, max_depth=DEPTH_MAX, size=8)) == 3
    assert drafted(DiscoStop(p, 0.2, width=2, max_depth=DEPTH_MAX, size=8)) == DEPTH_MAX


def scored_traces(seed: int, n: int = 400):
    """Greedy traces where the path's level-j token is accepted exactly when the level's best
    candidate gained more than log 0.5 over the level above: a rule the features can express."""
    rng = np.random.default_rng(seed)
    levels = DEPTH_MAX - 1
    gains = np.log(rng.uniform(0.05, 1.0, (n, levels)))
    tops = np.cumsum(gains, axis=1)
    scores = np.full((n, levels, 4), -np.inf, dtype=np.float32)
    scores[:, :, 0] = tops
    scores[:, :, 1] = tops - 1.0
    ranks = np.full((n, levels, levels), NO_NODE, dtype=np.int16)
    for p in range(n):
        for j in range(1, levels + 1):
            if gains[p, j - 1] < np.log(0.5):
                break
            ranks[p, j - 1, j - 1:] = 0
    trace = PromptTrace(np.zeros(n + 1, np.int64), 20 + np.arange(n, dtype=np.int32), ranks,
                        scores.astype(np.float16), np.zeros((n, levels, 2), np.float16), False)
    return assemble([trace], [20], {"depth_max": DEPTH_MAX, "width": 2, "prompt_ids": ["p"]})


def test_acceptance_examples_label_each_level_given_the_levels_above():
    traces = scored_traces(1, n=50)
    x, y, w = acceptance_examples(traces, size=40)
    assert x.shape[1] == N_FEATURES and set(np.unique(y)) <= {0.0, 1.0} and np.all(w == 1)
    gain = x[:, 1]  # the best candidate's gain over the level above
    assert np.array_equal(y == 1, gain >= np.log(0.5) - 1e-3)
    # One example per level a path reached (its own level's token included): positions x
    # (levels accepted + 1, capped at the depth budget).
    reached = (traces.path_rank[:, :, -1] != NO_NODE).sum(1)
    assert len(y) == int(np.minimum(reached + 1, DEPTH_MAX - 1).sum())


def test_trained_predictor_learns_the_acceptance_rule_and_stops_where_it_should():
    predictor = fit_predictor(scored_traces(2), size=40)
    x, y, _ = acceptance_examples(scored_traces(3), size=40)  # held-out positions
    accuracy = np.mean((predictor.predict(x) > 0.5) == (y == 1))
    assert accuracy > 0.95, accuracy
    # An untrained network of the same shape does not know the rule.
    assert np.mean((AcceptancePredictor.random(seed=4).predict(x) > 0.5) == (y == 1)) < 0.85
    # Disco with the trained predictor drafts exactly as deep as the path is accepted (+1 level
    # where the rejected token is drafted and judged): tau equals the deepest static tree's.
    heldout = scored_traces(3)
    disco = replay(heldout, cost_model(), DiscoStop(predictor, 0.5, width=2, max_depth=DEPTH_MAX, size=40))
    deepest = replay(heldout, cost_model(), _static(DEPTH_MAX))
    assert disco.tau[0] == pytest.approx(deepest.tau[0], rel=0.02)
    assert disco.draft_calls[0] < 0.8 * deepest.draft_calls[0]


def _static(depth: int):
    from simspec.policies.base import StaticPolicy

    return StaticPolicy(depth, 2, 40)


def test_step_features_are_finite_on_padded_levels():
    frontier = np.array([[-0.5, -np.inf, -np.inf, -np.inf]], dtype=np.float32)
    features = step_features(frontier, np.array([2]), np.zeros(1), DEPTH_MAX)
    assert np.all(np.isfinite(features))


# --- decision time of a policy that decides once per interval (Re-SpS's N) -----------------------

def test_a_held_policy_is_charged_its_decision_averaged_over_the_interval():
    """A policy that pays 2 ms every 10th cycle costs 0.2 ms per cycle on average; a median of
    single cycles would charge it almost nothing, which hid Re-SpS's N trade-off."""
    import time

    from simspec.policies.base import StaticPolicy
    from simspec.policies.timing import policy_latency

    class EveryTenth(StaticPolicy):
        hold = 10

        def __init__(self) -> None:
            super().__init__(4, 2, 8)
            self.cycle = 0

        def plan_batch(self, rows, context):
            self.cycle += 1
            if self.cycle % self.hold == 0:
                time.sleep(0.002)
            return super().plan_batch(rows, context)

    charged = policy_latency({"p": EveryTenth()}, width=2, depth=4, repeats=200)["p"]
    assert 1.5e-4 < charged < 6e-4, charged
