"""Seed 003's per-prompt draft-model selection (``simspec.sim.selection``) on crafted traces
where the right drafter for each prompt is known, and the ``select`` baseline of
``validate --simulated`` with its bad input. numpy only."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEPTH_MAX, cli, cost_model, last_json, simspec, synthetic_profile, synthetic_samples

from simspec.errors import SimspecError
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.selection import (
    Drafter,
    DraftSelector,
    align,
    chain_speedup,
    compare,
    prompt_features,
    single_token_accuracy,
)
from simspec.sim.traces import NO_NODE, PromptTrace, assemble

N_PROMPTS, POSITIONS = 24, 40
LEVELS = DEPTH_MAX - 1


def repetitive(i: int) -> bool:
    return i % 2 == 0


def prompt(i: int) -> list[int]:
    """Repetitive prompts repeat one bigram; the others never repeat a token."""
    n = 20 + i
    return [1, 2] * (n // 2) if repetitive(i) else list(range(100 + 50 * i, 100 + 50 * i + n))


def drafter_traces(hit_rate, seed: int, ids=None, target: str = "t"):
    """Traces of one drafter: at each position its whole chain of best drafts is right (the
    greedy path runs through rank j - 1 at depth j) with probability ``hit_rate(prompt)``,
    else its first draft is already wrong."""
    rng = np.random.default_rng(seed)
    traces = []
    for i in range(N_PROMPTS):
        ranks = np.full((POSITIONS, LEVELS, LEVELS), NO_NODE, dtype=np.int16)
        for p in np.flatnonzero(rng.random(POSITIONS) < hit_rate(i)):
            for j in range(1, LEVELS + 1):
                ranks[p, j - 1, j - 1:] = j - 1
        traces.append(PromptTrace(np.zeros(POSITIONS + 1, np.int64),
                                  len(prompt(i)) + np.arange(POSITIONS, dtype=np.int32),
                                  ranks, np.zeros((POSITIONS, LEVELS, 4), np.float16),
                                  np.zeros((POSITIONS, LEVELS, 2), np.float16), False))
    ids = ids or [f"p{i}" for i in range(N_PROMPTS)]
    splits = ["train", "train", "heldout", "heldout"] * (N_PROMPTS // 4)
    return assemble(traces, [prompt(i) for i in range(N_PROMPTS)],
                    {"depth_max": DEPTH_MAX, "width": 2, "prompt_ids": ids, "splits": splits, "target": target})


def slow_drafts() -> CostModel:
    """``helpers.cost_model`` with draft steps 20 times dearer."""
    base = cost_model()
    points = [Point("draft", n, c, float(base.draft(n, c)) * 20) for c in (32, 512) for n in (1, 4, 16)]
    for kind in ("verify", "greedy"):
        points += [Point(kind, n, c, float(base.curves[kind](n, c))) for c in (32, 512) for n in (1, 8, 64)]
    return CostModel(points)


# A is right on repetitive prompts, B on the others; C is mediocre everywhere and dear.
RATES = {"A": lambda i: 0.9 if repetitive(i) else 0.15, "B": lambda i: 0.15 if repetitive(i) else 0.85,
         "C": lambda i: 0.5}


@pytest.fixture(scope="module")
def drafters():
    return [Drafter(name, name, drafter_traces(RATES[name], seed), slow_drafts() if name == "C" else cost_model())
            for seed, name in enumerate("ABC")]


def test_chain_speedup_is_the_papers_model_at_its_best_window():
    alpha, c = 0.8, 0.1
    gamma = np.arange(1, 17)
    expected = np.max((1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1)))
    assert chain_speedup(np.array(alpha), np.array(c)) == pytest.approx(expected)
    assert chain_speedup(np.array(0.9), np.array(0.1)) > chain_speedup(np.array(0.6), np.array(0.1))
    assert chain_speedup(np.array(0.8), np.array(0.05)) > chain_speedup(np.array(0.8), np.array(0.5))


def test_features_and_accuracy_read_the_prompts_and_the_first_draft(drafters):
    traces = drafters[0].traces
    features = prompt_features(traces)
    assert features[0, 3] > 0.8 and features[1, 3] == 0  # repeated bigrams
    assert features[0, 2] < 0.2 and features[1, 2] == 1  # distinct tokens
    alpha = single_token_accuracy(traces)
    first = traces.path_rank[:, 0, 0] == 0  # the first draft is the target's token
    assert alpha[3] == pytest.approx(first[traces.prompt_positions(3)].mean())
    assert alpha[::2].mean() > 0.75 and alpha[1::2].mean() < 0.3


def test_selection_picks_the_drafter_that_is_right_for_each_prompt(drafters):
    order = np.arange(N_PROMPTS)
    train, heldout = order[order % 4 < 2], order[order % 4 >= 2]
    found = compare(drafters, train, heldout, None)
    expected = np.where(heldout % 2 == 0, 0, 1)  # A on repetitive prompts, B on the others
    assert np.array_equal(found.chosen, expected)
    assert np.array_equal(found.hindsight, expected)
    selected = found.pick(found.chosen).speedup.mean()
    fixed = found.results[found.fixed].speedup.mean()
    assert selected > 1.2 * fixed  # either fixed drafter is wrong on half the prompts
    assert found.alpha_error.max() < 0.1
    assert 0 < found.decision_seconds < 0.01


def test_a_dear_drafter_loses_to_an_equally_accurate_cheap_one():
    """Same accuracy, 20 times the draft cost: the throughput model never picks it."""
    same = lambda i: 0.7  # noqa: E731
    pair = [Drafter("dear", "dear", drafter_traces(same, 0), slow_drafts()),
            Drafter("cheap", "cheap", drafter_traces(same, 0), cost_model())]
    features = prompt_features(pair[0].traces)
    alpha = np.stack([single_token_accuracy(d.traces) for d in pair], axis=1)
    ratios = [float(d.cost.draft(2, 40) / d.cost.greedy(40)) for d in pair]
    assert np.all(DraftSelector.fit(features, alpha, np.array(ratios)).choose(features) == 1)


def test_align_follows_prompt_ids_and_refuses_what_does_not_match(drafters):
    main = drafters[0].traces
    shuffled = drafter_traces(RATES["B"], 1, ids=[f"p{i}" for i in reversed(range(N_PROMPTS))])
    aligned = align(main, shuffled, "B")
    assert aligned.meta.prompt_ids == main.meta.prompt_ids
    assert np.array_equal(aligned.continuation(0), shuffled.continuation(N_PROMPTS - 1))
    with pytest.raises(SimspecError, match="no traces of 1 prompt"):
        align(main, drafter_traces(RATES["B"], 1, ids=[f"p{i}" for i in range(N_PROMPTS - 1)] + ["other"]), "B")
    with pytest.raises(SimspecError, match="target 'u'"):
        align(main, drafter_traces(RATES["B"], 1, target="u"), "B")


# --- the select baseline of validate --simulated, as a user runs it -----------------------------

def _profile(root, name: str, traces, draft_scale: float = 1.0):
    traces.meta = traces.meta.with_(draft=name)
    return synthetic_profile(root, traces, name, samples=synthetic_samples(draft_scale))


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    root = tmp_path_factory.mktemp("select")
    return {name: _profile(root, name, drafter_traces(RATES[name], seed), 20.0 if name == "C" else 1.0)
            for seed, name in enumerate("ABC")} | {
        "short": _profile(root, "short", drafter_traces(RATES["B"], 1, ids=[f"q{i}" for i in range(N_PROMPTS)]))}


@pytest.mark.e2e
def test_select_baseline_reports_selection_beside_fixed_and_hindsight(profiles):
    result = simspec("validate", "--simulated", "--profile", profiles["A"], "--baselines", "grid,select",
                     "--drafters", f"{profiles['B']},{profiles['C']}", "--json")
    assert result.returncode == 0, result.stderr
    summary = last_json(result)
    assert "NaN" not in result.stdout.strip().splitlines()[-1]  # strict JSON: what does not apply is null
    rows = {r["method"].split("@")[-1].split("(")[0]: r for r in summary["rows"]}
    assert {"A", "B", "C", "fixed-best-drafter", "select", "hindsight-drafter"} <= set(rows)
    assert rows["select"]["speedup_mean"] > rows["fixed-best-drafter"]["speedup_mean"]
    assert rows["select"]["speedup_mean"] == pytest.approx(rows["hindsight-drafter"]["speedup_mean"], rel=1e-3)
    chosen = {d["name"]: d["chosen"] for d in summary["selection"]["drafters"]}
    assert chosen == {"A": 6, "B": 6, "C": 0}
    assert "select(seed003)" in result.stdout


@pytest.mark.parametrize("extra, message", [
    ((), "the 'select' baseline (seed 003's draft selection) and --drafters go together"),
    (("--drafters", "{A}"), "must name profiles of other drafters"),
    (("--drafters", "{short}"), "has no traces of 24 prompt(s)"),
    (("--drafters", "{B}", "--baselines", "grid"), "--drafters is read by the 'select' baseline only"),
])
def test_select_bad_input_is_one_line(profiles, extra, message):
    args = [a.format(**profiles) for a in extra]
    baselines = [] if "--baselines" in args else ["--baselines", "grid,select"]
    result = cli("validate", "--simulated", "--profile", profiles["A"], *baselines, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
