"""Batched plain greedy generation with the target: the teacher text drafters learn from and
the continuations traces are recorded along."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import torch

from simspec.engine.modeling import base_and_head, head_logits
from simspec.engine.models import LoadedModel


def length_batches(prompts: list[list[int]], batch: int) -> list[list[int]]:
    """The prompt indices ``greedy_continuations`` runs together: stably sorted by length, in groups
    of ``batch`` (whole groups batch the same way alone: sharded recordings reproduce exactly)."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # similar lengths batch well
    return [order[start:start + batch] for start in range(0, len(order), batch)]


def row_seed(seed: int, prompt: list[int]) -> int:
    """The seed of one prompt's sample: ``seed`` and the prompt's ids, nothing else."""
    return int(hashlib.sha256(json.dumps([seed, prompt]).encode()).hexdigest()[:15], 16)


@torch.inference_mode()
def greedy_continuations(target: LoadedModel, prompts: list[list[int]], new_tokens: int, batch: int,
                         advance: Callable[[int], None] = lambda n: None,
                         on_batch: Callable[[dict[int, list[int]]], None] = lambda outputs: None,
                         temperature: float = 0.0, seed: int = 0, stop: frozenset[int] = frozenset()
                         ) -> list[list[int]]:
    """Prompt + continuation for every prompt, greedy (or sampled at ``temperature`` > 0), in
    left-padded batches of similar lengths (a hand loop: ``model.generate`` ran far slower). With
    ``stop``, a batch ends once every row has emitted one of its tokens (the caller cuts there).
    Each row samples from a generator seeded by ``seed`` and its prompt, whatever its batch.
    ``on_batch`` sees the outputs after each batch."""
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
        draws = [torch.Generator().manual_seed(row_seed(seed, prompts[i])) for i in idx] if temperature > 0 else []

        def pick(last: torch.Tensor) -> torch.Tensor:
            logits = head_logits(head, last).float()
            if not draws:
                return logits.argmax(-1)
            probs = torch.softmax(logits / temperature, dim=-1).cpu()
            drawn = [torch.multinomial(row, 1, generator=g) for row, g in zip(probs, draws)]
            return torch.cat(drawn).to(last.device)

        inputs, generated = ids, []
        ended = torch.zeros(len(idx), dtype=torch.bool)
        while len(generated) < max(new_tokens, 1) and not bool(ended.all()):
            hidden = base(input_ids=inputs, attention_mask=mask, position_ids=positions,
                          past_key_values=cache).last_hidden_state
            generated.append(pick(hidden[:, -1]))
            if stop:
                ended |= torch.tensor([int(t) in stop for t in generated[-1].tolist()])
            inputs = generated[-1][:, None]
            mask = torch.cat([mask, mask.new_ones((len(idx), 1))], dim=1)
            positions = positions[:, -1:] + 1
        continuation = torch.stack(generated, dim=1).cpu()
        for row, i in enumerate(idx):
            outputs[i] = prompts[i] + continuation[row].tolist()
        advance(len(idx))
        on_batch(outputs)
    return [outputs[i] for i in range(len(prompts))]
