"""Batched plain greedy generation with the target: the teacher text drafters learn from and
the continuations traces are recorded along."""

from __future__ import annotations

from typing import Callable

import torch

from simspec.engine.modeling import base_and_head, head_logits
from simspec.engine.models import LoadedModel


def length_batches(prompts: list[list[int]], batch: int) -> list[list[int]]:
    """The prompt indices ``greedy_continuations`` runs together: sorted by length (stably), in
    groups of ``batch``. A subset made of whole groups, listed in this order, batches the same way,
    which is what lets sharded recordings reproduce a single process's continuations exactly."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # similar lengths batch well
    return [order[start:start + batch] for start in range(0, len(order), batch)]


@torch.inference_mode()
def greedy_continuations(target: LoadedModel, prompts: list[list[int]], new_tokens: int, batch: int,
                         advance: Callable[[int], None] = lambda n: None) -> list[list[int]]:
    """Batched greedy generation, returning prompt + continuation for every prompt.

    Left-padded batches of similar-length prompts, one KV-cached step per token. (A hand loop:
    on this CPU ``model.generate`` ran ~10x slower for the same batches.) Sequences keep
    generating past EOS; the caller truncates to its sequence length anyway."""
    from transformers import DynamicCache

    base, head = base_and_head(target.model)
    device = target.device
    outputs: dict[int, list[int]] = {}
    for idx in length_batches(prompts, batch):
        width = max(len(prompts[i]) for i in idx)
        ids = torch.zeros((len(idx), width), dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, width - len(prompts[i]):] = torch.tensor(prompts[i])
            mask[row, width - len(prompts[i]):] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        hidden = base(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache).last_hidden_state
        token = head_logits(head, hidden[:, -1]).argmax(-1)
        generated = [token]
        for _ in range(new_tokens - 1):
            mask = torch.cat([mask, mask.new_ones((len(idx), 1))], dim=1)
            positions = positions[:, -1:] + 1
            hidden = base(input_ids=token[:, None], attention_mask=mask, position_ids=positions,
                          past_key_values=cache).last_hidden_state
            token = head_logits(head, hidden[:, -1]).argmax(-1)
            generated.append(token)
        continuation = torch.stack(generated, dim=1).cpu()
        for row, i in enumerate(idx):
            outputs[i] = prompts[i] + continuation[row].tolist()
        advance(len(idx))
    return [outputs[i] for i in range(len(prompts))]
