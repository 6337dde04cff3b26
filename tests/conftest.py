"""Shared fixtures: the real demo target, loaded once per test session."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def target():
    from simspec.engine.models import load_model

    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def prompt_ids(target):
    """Four held-out prompts: two HumanEval, two ShareGPT, rendered with the chat template."""
    from simspec.data import load_prompts, render_chat

    chosen = load_prompts("humaneval", split="heldout", n=2) + load_prompts(
        "sharegpt", split="heldout", n=2, max_chars=600
    )
    return [(p.id, render_chat(target.tokenizer, p.text)) for p in chosen]


@pytest.fixture(scope="session")
def random_drafter(target):
    """A randomly initialised one-layer Llama over the target's vocabulary: accepts ~nothing."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from simspec.engine.drafter import CausalLMDrafter

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=target.model.config.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
    )
    return CausalLMDrafter(LlamaForCausalLM(config).eval().requires_grad_(False), "random")
