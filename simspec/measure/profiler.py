"""Latency measurements of a cycle's pieces on the device at hand, warmed up, repeated and kept whole
(medians and quartiles are quoted: a shared machine's occasional slow outliers would smear a mean)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from simspec.engine.drafter import Drafter
from simspec.engine.modeling import head_logits
from simspec.engine.models import LoadedModel
from simspec.engine.records import clock


@dataclass(frozen=True)
class Latency:
    """Repeated timings of one operation at one operating point; seconds."""

    kind: str  # "verify" (target forward of `tokens` tokens) or "draft" (one draft step of `tokens` nodes)
    tokens: int
    context: int
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def iqr(self) -> tuple[float, float]:
        q25, q75 = np.percentile(self.samples, [25, 75])
        return float(q25), float(q75)

    def to_dict(self) -> dict:
        return {**asdict(self), "median": self.median, "q25": self.iqr[0], "q75": self.iqr[1]}


def time_repeated(run: Callable[[], None], device: torch.device, repeats: int, warmup: int = 2) -> tuple[float, ...]:
    """Seconds per call of ``run``, ``repeats`` times after ``warmup`` discarded calls."""
    return time_interleaved({None: run}, device, repeats, warmup)[None]


def time_interleaved(runs: dict, device: torch.device, repeats: int, warmup: int = 2,
                     advance: Callable[..., None] = lambda n=1: None) -> dict:
    """Seconds per call of each of ``runs`` (operating point -> callable), ``repeats`` times each, in
    rounds of every point once, so that a shared machine's slow minutes fall on every point alike
    (timed block by block, a curve can gain a slope no forward has: docs/calibration.md).
    ``advance(n)`` is told each round's share of the points."""
    for run in runs.values():
        for _ in range(warmup):
            run()
    samples: dict = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            start = clock(device)
            run()
            samples[key].append(clock(device) - start)
        advance(len(runs) / repeats)
    return {key: tuple(times) for key, times in samples.items()}


def _context_ids(context: int, vocab: int, device: torch.device) -> torch.Tensor:
    # Token values do not change the arithmetic; a fixed pseudo-random prefix keeps runs comparable.
    generator = torch.Generator().manual_seed(context)
    return torch.randint(100, vocab, (context,), generator=generator).to(device)


def _drafter_context(drafter: Drafter, context: int, vocab: int, device: torch.device):
    """A context of L tokens for the drafter, and the target features it reads (zeros), if any."""
    hidden = (torch.zeros(context, drafter.feature_width, device=device, dtype=drafter.dtype)
              if drafter.uses_target_hidden else None)
    return _context_ids(context, vocab, device), hidden


@torch.inference_mode()
def target_latency(target: LoadedModel, sizes: Sequence[int], contexts: Sequence[int], repeats: int,
                   advance: Callable[..., None] = lambda n=1: None, runtime: str = "eager",
                   batch: int = 1) -> list[Latency]:
    """One verify step through the engine's own target: ``batch`` rows of V tree tokens (mask, head and
    argmax included), each after its own L (V = 1: a plain step); every (V, L) timed in rounds (whose
    discarded warm-up calls also compile under the compiled runtime), one set of rows per context.
    Block by block, five repeats of a point gave the plain step at batch 4 a context slope twice the
    engine's (``research/scripts/batch-context-slope.py``)."""
    from simspec.engine.compiled_rows import target_rows
    from simspec.engine.kv_rows import causal

    device, vocab = target.device, target.model.config.vocab_size
    runs = {}
    for context in contexts:
        rows = target_rows(target, batch, context + max(sizes), runtime=runtime)
        ids = _context_ids(context, vocab, device)
        for b in range(batch):
            rows.prefill(b, ids)
        for size in sizes:
            tree = (_context_ids(size, vocab, device).cpu().numpy(), np.arange(size), causal(size))

            def run(rows=rows, trees=dict.fromkeys(range(batch), tree)) -> None:  # the rows' lengths stay
                hidden, _ = rows.forward(trees)
                head_logits(rows.head, hidden.reshape(-1, hidden.shape[-1])).argmax(-1).cpu()

            runs[size, context] = run
    timed = time_interleaved(runs, device, repeats, advance=advance)
    return [Latency("verify", size, context, samples) for (size, context), samples in timed.items()]


@torch.inference_mode()
def draft_latency(drafter: Drafter, vocab: int, widths: Sequence[int], contexts: Sequence[int], repeats: int,
                  device: torch.device, advance: Callable[..., None] = lambda n=1: None,
                  warmup: int = 2) -> list[Latency]:
    """One draft step expanding W frontier nodes (top-W and the host copy included) after L tokens,
    timed in rounds: the drafter holds one context at a time, so each round sets every context up
    again (untimed) and times each W once there, in an order rotated round by round (timed block by
    block, drift between contexts reads as a slope in L: docs/calibration.md)."""
    setups = [(context, *_drafter_context(drafter, context, vocab, device)) for context in contexts]
    feeds = {w: (_context_ids(w, vocab, device), torch.eye(w, dtype=torch.bool, device=device)) for w in widths}

    def step(width: int) -> None:
        frontier, visible = feeds[width]
        logprobs = drafter.draft_level(frontier, 1, visible)
        drafter.top_candidates(logprobs, width)
        drafter.end_cycle()

    samples: dict = {(w, c): [] for c in contexts for w in widths}
    for round_ in range(warmup + repeats):
        for context, ids, hidden in setups:
            drafter.reset(ids[:-1], None if hidden is None else hidden[:-1])
            drafter.commit(ids[-1:], None if hidden is None else hidden[-1:])
            drafter.draft_root()
            # rotated round by round: the first step after the set-up runs cold, and the median
            # then drops that one sample of each width instead of biasing the first width
            for width in np.roll(np.asarray(widths), -round_):
                width = int(width)
                start = clock(device)
                step(width)
                if round_ >= warmup:
                    samples[width, context].append(clock(device) - start)
        if round_ >= warmup:
            advance(len(samples) / repeats)
    return [Latency("draft", w, c, tuple(times)) for (w, c), times in samples.items()]


def batched_draft_latency(drafter: Drafter, vocab: int, batch: int, widths: Sequence[int], contexts: Sequence[int],
                          repeats: int, device: torch.device, advance: Callable[..., None] = lambda n=1: None,
                          active: Sequence[int] = ()) -> list[tuple[int, Latency]]:
    """One draft step of ``batch`` sequences, each expanding W frontier nodes after its own L tokens,
    through the engine's batched drafter; also, for each count in ``active``, the step in which only
    that many rows draft (the forward still pads over the others); every point timed in rounds, one
    batched drafter per context. Returns (rows, latency); ``advance`` counts (W, L) points."""
    from simspec.engine.batch_models import batched

    rows, counts = list(range(batch)), sorted({batch, *active})
    feeds = {w: (_context_ids(w, vocab, device).cpu().numpy(), 1, np.eye(w, dtype=bool)) for w in widths}
    runs = {}
    for context in contexts:
        rows_drafter = batched(drafter, batch, context + 2 * max(widths) + 8)
        ids, hidden = _drafter_context(drafter, context, vocab, device)
        for b in rows:
            rows_drafter.reset_row(b, ids[:-1], None if hidden is None else hidden[:-1])
            rows_drafter.commit(b, ids[-1:], None if hidden is None else hidden[-1:])
        rows_drafter.draft_root(rows)
        for width in widths:
            for count in counts:
                def run(rows_drafter=rows_drafter, drafting=rows[:count], width=width) -> None:
                    for logprobs in rows_drafter.draft_level(drafting, [feeds[width]] * len(drafting)):
                        rows_drafter.top_candidates(logprobs, width)
                    rows_drafter.end_cycle()

                runs[count, width, context] = run
    timed = time_interleaved(runs, device, repeats, advance=lambda n=1: advance(n / len(counts)))
    return [(count, Latency("draft", width, context, samples)) for (count, width, context), samples in timed.items()]


def memory_bandwidth(device: torch.device, megabytes: int = 256, repeats: int = 7) -> float:
    """Bytes per second a large tensor copy moves (read + write): the best a memory-bound decode step streams."""
    src = torch.ones(megabytes * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    seconds = time_repeated(lambda: dst.copy_(src), device, repeats)
    return 2 * src.numel() * src.element_size() / float(np.median(seconds))


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters (tied weights once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())
