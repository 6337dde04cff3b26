"""What a decoding run leaves: a record per cycle, a generation per sequence, the batch's totals.
The engine (``simspec.engine.speculative``) writes them; bench, validate and calibrate read them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch


def clock(device: torch.device) -> float:
    """Wall-clock seconds, after the device has finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@dataclass(frozen=True)
class CycleRecord:
    """One draft-and-verify cycle, times in seconds (a batch's on every row's record); bookkeeping:
    all but model forwards and policy calls."""

    depth: int  # levels drafted, root included (1: nothing drafted)
    width: int
    size: int  # tokens in the target's forward (root included)
    accepted: int  # draft tokens accepted; the cycle emits accepted + 1 tokens
    draft_calls: int
    draft_s: float
    verify_s: float
    policy_s: float
    bookkeeping_s: float


@dataclass
class Generation:
    """A finished generation: the new tokens and what every cycle did."""

    tokens: list[int]
    prompt_length: int
    prefill_s: float
    total_s: float  # prefill included
    cycles: list[CycleRecord] = field(default_factory=list)
    seed: int | None = None  # the generator's seed (None: greedy decoding)
    admitted_at: float = 0.0  # seconds into its batch run when it took a row (its prefill began)

    @property
    def first_token_at(self) -> float:
        return self.admitted_at + self.prefill_s

    @property
    def finished_at(self) -> float:
        return self.admitted_at + self.total_s

    @property
    def tau(self) -> float:
        """Mean tokens emitted per cycle (accepted drafts + the bonus token)."""
        return float(np.mean([c.accepted + 1 for c in self.cycles])) if self.cycles else 1.0

    def time_shares(self) -> dict[str, float]:
        """Share of total time spent drafting, verifying, in the policy, in bookkeeping, in prefill."""
        parts = {k: sum(getattr(c, f"{k}_s") for c in self.cycles)
                 for k in ("draft", "verify", "policy", "bookkeeping")}
        return {k: v / self.total_s for k, v in {**parts, "prefill": self.prefill_s}.items()}


@dataclass(frozen=True)
class BatchCycle:
    """One batched cycle's shape and times, as the simulator prices it (``simspec.sim.replay``)."""

    depth: np.ndarray  # [busy rows] tree levels drafted (1 per row for a plain step)
    size: np.ndarray  # [busy rows] tokens verified (1 per row for a plain step)
    context: int  # the longest busy row's committed tokens: what the forwards' attention reads
    fed: int  # nodes the first draft level feeds: the most tokens a row committed last cycle
    draft_s: float
    verify_s: float  # a plain step's forward, for plain decoding
    policy_s: float
    bookkeeping_s: float  # the rest of the cycle


@dataclass
class BatchRun:
    """Every prompt's generation (input order) and the batch's totals."""

    generations: list[Generation]
    batch_size: int
    total_s: float  # wall time of the whole queue, prefills included
    cycles: int  # batched target forwards after the prefills
    idle_row_cycles: int = 0  # rows that rode along as padding, summed over cycles
    prefill_s: float = 0.0  # the batch's seconds in each part, summed over the run
    draft_s: float = 0.0
    verify_s: float = 0.0
    draft_forwards: int = 0  # the drafter's batched forwards (one per level of the cycle's deepest row)
    policy_s: float = 0.0  # in the policy's batch methods
    batch_cycles: list[BatchCycle] = field(default_factory=list)  # every cycle, in order

    def time_shares(self) -> dict[str, float]:
        """``Generation.time_shares``' parts, for the batch."""
        rest = self.total_s - self.prefill_s - self.draft_s - self.verify_s - self.policy_s
        parts = {"draft": self.draft_s, "verify": self.verify_s, "policy": self.policy_s, "bookkeeping": max(0.0, rest),
                 "prefill": self.prefill_s}
        return {k: v / self.total_s for k, v in parts.items()}

    @property
    def tokens(self) -> int:
        return sum(len(g.tokens) for g in self.generations)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.total_s
