"""Targets beyond Llama: tiny random-weight Qwen2, Qwen3, Mistral, Phi-3 and Gemma models
(configs built here), each with an EAGLE-3 head sized to it (``eagle3_for_target``) and its own
first layers as a draft LM. Greedy speculative decoding equals Hugging Face's own greedy
``generate`` token for token, one sequence at a time and in batches, and sampling at T = 1 (in
batches of eight: a draw per sequence, cheaper than one engine call each) gives the target's
joint law of the first two tokens (the G-test of test_sampling.py, whose power is shown there
on a broken verifier). A sliding window shorter than the sequence
is refused in one line."""

from __future__ import annotations

import pytest
import torch
from helpers import PASS, tiny_drafters, tiny_model
from helpers import TINY_PROMPT as PROMPT
from test_sampling import first_two_p_value

from simspec.engine.context import attention_window, served_context
from simspec.engine.sampling import Sampling
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies.base import StaticPolicy

pytestmark = pytest.mark.model  # every test builds a tiny target of its family

FAMILIES = ["qwen2", "qwen3", "mistral", "phi3", "gemma"]
SHAPES = [(3, 3, 7), (5, 2, 8), (4, 1, 4)]  # a tree, a deeper one, a chain
NEW = 40


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    target = tiny_model(request.param, 6)
    return request.param, target, tiny_drafters(target, 2)


def reference(target, prompt: list[int]) -> list[int]:
    """Hugging Face's own greedy continuation."""
    with torch.inference_mode():
        out = target.model.generate(torch.tensor([prompt]), max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)
    return out[0, len(prompt):].tolist()


def test_every_drafter_decodes_each_family_as_its_own_greedy_generate(family):
    name, target, drafters = family
    expected = reference(target, PROMPT)
    for drafter_name, drafter in drafters.items():
        engine = SpeculativeEngine(target, drafter)
        assert engine.greedy(PROMPT, NEW).tokens == expected, (name, "plain")
        for shape in SHAPES:
            assert engine.generate(PROMPT, StaticPolicy(*shape), NEW).tokens == expected, (name, drafter_name, shape)


def test_batches_of_each_family_decode_as_its_greedy_generate(family):
    """Three prompts of different lengths through two rows (a row refilled), plain and with a tree."""
    name, target, drafters = family
    prompts = [PROMPT, PROMPT[:4] + [7, 8, 9], [1, 2, 3]]
    expected = [reference(target, p) for p in prompts]
    for drafter_name, drafter in drafters.items():
        engine = SpeculativeEngine(target, drafter, batch_size=2)
        assert [g.tokens for g in engine.decode(prompts, None, NEW).generations] == expected, (name, "plain")
        run = engine.decode(prompts, StaticPolicy(3, 3, 7), NEW)
        assert [g.tokens for g in run.generations] == expected, (name, drafter_name)


def test_sampling_from_each_family_keeps_the_targets_law(family):
    name, target, drafters = family
    engine = SpeculativeEngine(target, drafters["eagle3"], batch_size=8, sampling=Sampling(1.0))
    assert first_two_p_value(engine, StaticPolicy(3, 3, 7), 600) > PASS, name


def test_a_sliding_window_shorter_than_the_sequence_is_refused():
    mistral = tiny_model("mistral", 2, sliding_window=16)
    assert served_context(mistral.model.config)[0] == 16
    engine = SpeculativeEngine(mistral, tiny_drafters(mistral, 1)["lm"])
    engine.check_length(PROMPT, 16 - len(PROMPT))  # within the window: served
    with pytest.raises(SimspecError, match="sliding attention window of 16 tokens"):
        engine.generate(PROMPT, StaticPolicy(3, 2, 5), 17 - len(PROMPT))
    # Qwen2 keeps a window in its config but attends fully unless told to slide.
    qwen = tiny_model("qwen2", 1, sliding_window=16)
    assert attention_window(qwen.model.config) is None and served_context(qwen.model.config)[0] == 512
