"""Checking that speculative output equals plain greedy output, and explaining it when not;
at temperature > 0, that it follows the target's distribution (``output_pit``).

Tree verification sums in another order than one-token decoding, so an exact near-tie may flip:
a divergence is reported with the target's top-2 logit gap there and the dtype's tolerance
(fp32: ``NEAR_TIE``; bf16 / fp16: ``TIE_ULPS`` ulps of the top logit, what the two orders differ
by, docs/results.md "bf16 arithmetic between computation orders"). Anything larger is a bug.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from simspec.engine.modeling import base_and_head, head_logits
from simspec.engine.models import LoadedModel

NEAR_TIE = 1e-4  # fp32
TIE_ULPS = 4  # bf16 / fp16: ulps of the top logit


def tie_tolerance(top_logit: float, dtype: torch.dtype) -> float:
    """The largest top-2 gap two computation orders can flip in ``dtype``."""
    if dtype == torch.float32:
        return NEAR_TIE
    return TIE_ULPS * torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(top_logit), 1e-6)))


@dataclass(frozen=True)
class Divergence:
    position: int  # index into the generated tokens
    speculative_token: int | None  # None: the speculative output ended here
    greedy_token: int | None
    top2_gap: float  # target's best minus second-best logit at that position
    tolerance: float = NEAR_TIE  # the dtype's tie tolerance at that logit (``tie_tolerance``)

    @property
    def near_tie(self) -> bool:
        return self.top2_gap < NEAR_TIE or self.top2_gap <= self.tolerance and self.tolerance > NEAR_TIE

    @classmethod
    def from_dict(cls, record: dict) -> Divergence:
        """From a report's or a ``--json`` line's record (extra keys such as the prompt ignored)."""
        return cls(record["position"], record["speculative_token"], record["greedy_token"], record["top2_gap"],
                   record.get("tolerance", NEAR_TIE))

    def describe(self) -> str:
        kind = "near-tie" if self.near_tie else "BUG"
        return (
            f"differs at generated token {self.position}: speculative {self.speculative_token} vs greedy "
            f"{self.greedy_token}, target top-2 logit gap {self.top2_gap:.2e} (tolerance {self.tolerance:.2e}: {kind})"
        )


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or None when the sequences are equal."""
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return None if same == len(a) == len(b) else same


@torch.inference_mode()
def top2(target: LoadedModel, prompt_ids: list[int], generated: list[int], position: int) -> tuple[float, float]:
    """The target's best logit and its top-2 gap when predicting ``generated[position]``."""
    base, head = base_and_head(target.model)
    ids = torch.tensor(prompt_ids + generated[:position], device=target.device)[None]
    logits = head_logits(head, base(input_ids=ids).last_hidden_state[0, -1:]).float()[0]
    best2 = torch.topk(logits, 2).values
    return float(best2[0]), float(best2[0] - best2[1])


def compare(target: LoadedModel, prompt_ids: list[int], speculative: list[int], greedy: list[int]) -> Divergence | None:
    """None when ``speculative == greedy``; else where and how close to a tie they split."""
    position = first_difference(speculative, greedy)
    if position is None:
        return None
    pick = lambda seq: seq[position] if position < len(seq) else None  # noqa: E731
    best, gap = top2(target, prompt_ids, greedy, position)
    return Divergence(position, pick(speculative), pick(greedy), gap, tie_tolerance(best, target.model.dtype))


def divergence_record(target: LoadedModel, prompt_id: str, prompt_ids: list[int], speculative: list[int],
                      greedy: list[int]) -> dict | None:
    """``compare``'s finding as a report records it; None when the outputs are equal."""
    found = compare(target, prompt_ids, speculative, greedy)
    return None if found is None else {"prompt": prompt_id, **asdict(found), "near_tie": found.near_tie}


PIT_ALARM = 1e-3  # KS p-value under which sampled outputs are reported as not the target's


@torch.inference_mode()
def output_pit(target: LoadedModel, prompt_ids: list[int], generated: list[int], sampling,
               rng: np.random.Generator) -> np.ndarray:
    """The randomised PIT of every generated token under the target's distribution at it
    (``sampling.pit_values``): Uniform(0, 1) i.i.d. exactly when the sampler is lossless."""
    from simspec.engine.sampling import distribution, pit_values

    base, head = base_and_head(target.model)
    ids = torch.tensor(prompt_ids + generated[:-1], device=target.device)[None]
    hidden = base(input_ids=ids).last_hidden_state[0, len(prompt_ids) - 1:]
    return pit_values(distribution(head_logits(head, hidden), sampling), np.array(generated), rng)


def pit_p_value(u) -> float:
    """KS p-value of PIT values against Uniform(0, 1) (1.0 for no values)."""
    from scipy import stats

    return float(stats.kstest(np.asarray(u), "uniform").pvalue) if len(u) else 1.0
