"""Small pieces every forward pass in the real backend shares."""

from __future__ import annotations

import torch


def base_and_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The decoder stack and the LM head of a Hugging Face causal LM."""
    return getattr(model, model.base_model_prefix), model.get_output_embeddings()


def head_logits(head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """``head(hidden)`` for ``hidden`` of shape [n, d], computed as ``(W @ hidden.T).T``.

    Same dot products, but with MKL on a CPU the [vocab, d] x [d, n] orientation avoids a slow
    small-M GEMM path at n = 2..6 (measured: docs/results/calibration.md#latency-of-the-target-and-the-drafts).
    Plain greedy decoding uses this function too, so both sides of the
    lossless comparison compute logits the same way."""
    weight, bias = getattr(head, "weight", None), getattr(head, "bias", None)
    if not isinstance(head, torch.nn.Linear) or weight is None:
        return head(hidden)
    logits = torch.mm(weight, hidden.T).T
    return logits + bias if bias is not None else logits


def additive_mask(visible: torch.Tensor, n_context: int, dtype: torch.dtype) -> torch.Tensor:
    """A ``(1, 1, n, n_context + m)`` float mask: the context is visible to every query, the
    last ``m`` key slots as ``visible`` says. HF attention adds it to the scores."""
    n = visible.shape[0]
    mask = torch.zeros((1, 1, n, n_context + visible.shape[1]), dtype=dtype, device=visible.device)
    mask[0, 0, :, n_context:].masked_fill_(~visible, torch.finfo(dtype).min)
    return mask


def aux_layer_ids(n_layers: int) -> tuple[int, int, int]:
    """The target layers whose *inputs* an EAGLE-3 head fuses when its config names none:
    a low, a middle and a high one (EAGLE-3's, SGLang's and vLLM's default)."""
    return (2, n_layers // 2, n_layers - 3)
