"""Small pieces every forward pass in the real backend shares."""

from __future__ import annotations

import torch


def base_and_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The decoder stack and the LM head of a Hugging Face causal LM."""
    return getattr(model, model.base_model_prefix), model.get_output_embeddings()


def head_logits(head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """``head(hidden)`` for ``hidden`` [n, d] as ``(W @ hidden.T).T``: with MKL on a CPU this avoids a
    slow small-M GEMM at n = 2..6 (docs/results/calibration.md#latency-of-the-target-and-the-drafts);
    plain decoding uses it too, so both sides of the lossless comparison compute alike."""
    weight, bias = getattr(head, "weight", None), getattr(head, "bias", None)
    if not isinstance(head, torch.nn.Linear) or weight is None:
        return head(hidden)
    logits = torch.mm(weight, hidden.T).T
    return logits + bias if bias is not None else logits


def aux_layer_ids(n_layers: int) -> tuple[int, int, int]:
    """The target layers whose *inputs* an EAGLE-3 head fuses when its config names none:
    a low, a middle and a high one (EAGLE-3's, SGLang's and vLLM's default)."""
    return (2, n_layers // 2, n_layers - 3)
