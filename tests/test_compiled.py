"""The compiled runtime (``simspec.engine.runtime``): the target's forwards under torch.compile
over a full-capacity static cache, padded to shape buckets. Compiling takes tens of seconds, so
these run in the model lane."""

import pytest

pytestmark = [pytest.mark.model, pytest.mark.one_worker]  # one worker compiles the graphs every test here meets


# A 2-layer target of the tiny family, and its drafters: every graph dynamo traces and inductor
# compiles is a third of the 6-layer one's; the static cache, padding and moves under test are
# the same at any depth.
@pytest.fixture(scope="module")
def tiny():
    from helpers import tiny_llama

    return tiny_llama(2)


@pytest.fixture(scope="module")
def drafters(tiny):
    from helpers import tiny_drafters

    return tiny_drafters(tiny, 1)

PROMPT = [3, 5, 7, 11, 2, 9, 4, 1] * 3
OTHER = [8, 2, 2, 6, 13, 1, 0, 5, 19, 3] * 2  # a second prompt: the graphs must read each sequence's cache
SHAPES = [(3, 3, 7), (4, 2, 8), (5, 1, 5), (2, 4, 5)]  # trees with non-prefix paths, a chain, depth 2
# (every one verifies 5-8 nodes: one bucket, so that the module compiles few graphs)


@pytest.fixture(scope="module")
def engines(tiny, drafters):
    from simspec.engine.speculative import SpeculativeEngine

    pairs = {name: (SpeculativeEngine(tiny, drafters[name]),
                    SpeculativeEngine(tiny, drafters[name], runtime="compiled")) for name in ("eagle3", "lm")}
    for _, compiled in pairs.values():
        compiled.tree_slots = 8  # as warm_up would set it for these trees, without compiling yet
    return pairs


@pytest.mark.long(seconds=10)
@pytest.mark.parametrize("draft", ["eagle3", "lm"])
def test_compiled_runs_decode_as_the_eager_ones_and_stay_lossless(engines, draft):
    """Every tree's output equals the compiled plain greedy decoding (lossless) and the eager
    engine's, cycle for cycle: padding, the full-capacity mask and the moved paths change nothing."""
    from simspec.policies.base import StaticPolicy

    eager, compiled = engines[draft]
    for prompt in (PROMPT, OTHER):
        plain = compiled.greedy(prompt, 40).tokens
        assert plain == eager.greedy(prompt, 40).tokens
        for shape in SHAPES:
            run = compiled.generate(prompt, StaticPolicy(*shape), 40)
            reference = eager.generate(prompt, StaticPolicy(*shape), 40)
            assert run.tokens == plain, shape
            assert [c.accepted for c in run.cycles] == [c.accepted for c in reference.cycles], shape
    assert compiled.compile_s > 0 and eager.compile_s == 0


@pytest.mark.long(seconds=40)
def test_warm_up_compiles_every_shape_a_run_meets(engines):
    """After ``warm_up`` for these prompts and trees, decoding compiles nothing more (a compile
    inside a timed run would be charged to the method)."""
    from simspec.engine.modeling import base_and_head
    from simspec.engine.runtime import compiled_forward
    from simspec.policies.base import StaticPolicy

    _, compiled = engines["eagle3"]
    prompts = [PROMPT, PROMPT * 12]
    compiled.warm_up([len(p) for p in prompts], 24, [8, 3, 6])
    forward = compiled_forward(base_and_head(compiled.target.model)[0])
    shapes = set(forward.shapes)
    for prompt in prompts:
        compiled.greedy(prompt, 24)
        for shape in [(4, 4, 8), (3, 2, 3), (6, 1, 6)]:
            compiled.generate(prompt, StaticPolicy(*shape), 24)
    assert forward.shapes == shapes


def test_a_broken_move_of_the_accepted_path_is_caught(engines, monkeypatch):
    """The equality above can fail: a compiled cache that keeps the path's first rows instead of
    moving the accepted ones diverges from plain decoding."""
    from simspec.engine.compiled_rows import CompiledTargetRows
    from simspec.policies.base import StaticPolicy

    def keep_prefix(self, b, rows):
        self.lengths[b] += len(rows)

    monkeypatch.setattr(CompiledTargetRows, "keep", keep_prefix)
    diverged = []
    for draft in ("eagle3", "lm"):
        _, compiled = engines[draft]
        for prompt in (PROMPT, OTHER):
            plain = compiled.greedy(prompt, 40).tokens
            diverged += [compiled.generate(prompt, StaticPolicy(*shape), 40).tokens != plain for shape in SHAPES]
    assert any(diverged)


def test_a_tree_larger_than_planned_grows_the_cache_and_stays_lossless(tiny, drafters, monkeypatch):
    """Warmed for trees of 4 nodes, a sequence's cache has 4 slots of slack: an 8-node tree near
    the end of the budget moves it to the next capacity, its context copied, and it decodes as
    plain decoding does. (Graphs the warm-up test compiled serve it: 4 and 8 tokens over 256 and
    512 slots; each new one is seconds of compiling.)"""
    from simspec.engine.compiled_rows import CompiledTargetRows
    from simspec.engine.modeling import base_and_head
    from simspec.engine.runtime import CAPACITY_STEP, compiled_forward
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    grown, grow = [], CompiledTargetRows._grow
    # (the compiled shapes are the process's: another test may have compiled the larger one already)
    monkeypatch.setattr(CompiledTargetRows, "_grow", lambda rows, slots: (grown.append(slots), grow(rows, slots))[1])
    prompt = (OTHER * 20)[: CAPACITY_STEP - 40 - 4]  # prompt + budget + slack fill one capacity step exactly
    engine = SpeculativeEngine(tiny, drafters["eagle3"], runtime="compiled")
    engine.warm_up([len(prompt)], 40, [4])
    assert engine.tree_slots == 4 and not grown
    assert engine.generate(prompt, StaticPolicy(4, 4, 8), 40).tokens == engine.greedy(prompt, 40).tokens
    assert grown and all(slots > CAPACITY_STEP for slots in grown)  # it grew, past the warmed capacity
    assert (8, 2 * CAPACITY_STEP, True, 1) in compiled_forward(base_and_head(tiny.model)[0]).shapes


QUEUE = [PROMPT, OTHER, PROMPT[:10], OTHER[:7], PROMPT[5:]]  # five sequences through three rows


@pytest.mark.long(seconds=20)
@pytest.mark.parametrize("draft", ["eagle3", "lm"])
def test_compiled_batches_decode_as_the_eager_ones_and_stay_lossless(tiny, drafters, draft):
    """The batched engine under the compiled runtime: every row's tokens written after the
    longest row's and moved down to its own length on acceptance; every sequence equals its
    plain greedy decoding and the eager batch's, cycle for cycle, with rows refilled from the
    queue (each new prefill copied into a row another sequence used)."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    eager = SpeculativeEngine(tiny, drafters[draft], batch_size=3)
    compiled = SpeculativeEngine(tiny, drafters[draft], batch_size=3, runtime="compiled")
    compiled.tree_slots = 8  # as warm_up sets it for these trees, without compiling other buckets
    plain = compiled.decode(QUEUE, None, 24)
    assert [g.tokens for g in plain.generations] == [g.tokens for g in eager.decode(QUEUE, None, 24).generations]
    for shape in SHAPES[:2]:
        run = compiled.decode(QUEUE, StaticPolicy(*shape), 24)
        reference = eager.decode(QUEUE, StaticPolicy(*shape), 24)
        assert [g.tokens for g in run.generations] == [g.tokens for g in plain.generations], shape
        assert [[c.accepted for c in g.cycles] for g in run.generations] == \
            [[c.accepted for c in g.cycles] for g in reference.generations], shape
