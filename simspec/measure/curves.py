"""Calibrate's latency curves: measured on the device through the engine's own code, or modelled."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from simspec.engine.batch_models import TargetRows
from simspec.engine.compiled_rows import target_rows
from simspec.engine.drafter import Drafter
from simspec.engine.modeling import base_and_head, head_logits
from simspec.engine.models import LoadedModel
from simspec.engine.sampling import GREEDY, Sampling, TreeVerifier, distribution, draw, row_distributions
from simspec.engine.tree import DraftTree
from simspec.measure import profiler
from simspec.sim.analytic import Architecture, DeviceSpec, forward_seconds
from simspec.sim.profile import sample_record


@dataclass(frozen=True)
class CurveGrid:
    """Operating points to measure. Every V up to 16, where tree policies spend most cycles and a
    CPU's curve need not be smooth (neighbours do not interpolate), then dense where GPUs step;
    three contexts, so that L is interpolated. Every draft width up to 16 and tree depth up to 12,
    for the same reason: a draft step's matrix products change kernels with the row count, and the
    host's work per cycle bends with depth where a small tree holds fewer nodes than V asks."""

    verify_sizes: tuple[int, ...] = (*range(1, 17), 20, 24, 28, 32, 40, 48, 56, 64, 72, 80, 96, 112, 128, 144, 160,
                                     192, 224, 256)
    draft_nodes: tuple[int, ...] = tuple(range(1, 17))
    contexts: tuple[int, ...] = (64, 256, 512)
    greedy_contexts: tuple[int, ...] = (32, 64, 128, 192, 256, 384, 512, 768)
    prefill_lengths: tuple[int, ...] = (16, 32, 64, 128, 192, 256, 384, 512)
    book_sizes: tuple[int, ...] = (1, 4, 8, 16, 32, 48, 60, 96, 128, 192, 240)
    book_depths: tuple[int, ...] = tuple(range(2, 13))
    book_width: int = 10
    repeats: int = 7
    # A cycle's bookkeeping takes 0.04-0.5 ms here: at 7 repeats its medians scatter so much that
    # the held-out error is 6 % / 17 % (median / p90); at 100, 1 % / 4 %, in about 3 s.
    book_repeats: int = 100

    @classmethod
    def quick(cls) -> CurveGrid:
        """A small grid for tests and the demo: same shape, fewer points."""
        return cls(verify_sizes=(1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64), draft_nodes=tuple(range(1, 11)),
                   contexts=(64, 320), greedy_contexts=(64, 192, 320), prefill_lengths=(32, 128, 256),
                   book_sizes=(1, 8, 32, 60, 128), book_depths=tuple(range(2, 9)), repeats=3)

    def covering(self, longest: int) -> CurveGrid:
        """This grid with contexts (and prefill lengths) out to ``longest`` tokens: a curve's last segment,
        extrapolated, would price a 2 k-token prompt's attention from a few hundred tokens'."""
        return replace(self, contexts=reach(self.contexts, longest),
                       greedy_contexts=reach(self.greedy_contexts, longest),
                       prefill_lengths=reach(self.prefill_lengths, longest))

    def count(self) -> int:
        return (len(self.verify_sizes) + len(self.draft_nodes)) * len(self.contexts) + len(self.greedy_contexts) \
            + len(self.prefill_lengths) + len(self.book_sizes) * len(self.book_depths)


def reach(points: tuple[int, ...], longest: int) -> tuple[int, ...]:
    """``points`` and, where ``longest`` lies past twice their last (a curve is extrapolated along its
    last segment, which holds over a short reach: the demo's 575 tokens beyond 320), 1024, 2048, ...
    below ``longest`` and ``longest`` rounded up to 256."""
    if longest <= 2 * points[-1]:
        return points
    doubling = [1 << k for k in range(10, 16) if points[-1] < 1 << k < longest]
    return (*points, *doubling, -(-longest // 256) * 256)


@torch.inference_mode()
def greedy_latency(target: LoadedModel, contexts, repeats: int, advance: Callable[..., None],
                   sampling: Sampling = GREEDY, runtime: str = "eager") -> list[dict]:
    """One plain decoding step after L tokens, argmax or at T > 0 a draw, as ``engine.plain`` does it."""
    vocab = target.model.config.vocab_size
    rng = np.random.default_rng(sampling.seed)
    step = {0: (profiler._context_ids(1, vocab, target.device).cpu().numpy(), np.zeros(1, dtype=np.int64),
                np.ones((1, 1), dtype=bool))}
    runs = {}
    for context in contexts:
        rows = target_rows(target, 1, context + 1, runtime=runtime)
        rows.prefill(0, profiler._context_ids(context, vocab, target.device))

        def run(rows=rows) -> None:  # the row's length stays: every run writes the same slot
            hidden, _ = rows.forward(step)
            logits = head_logits(rows.head, hidden[:, 0])
            logits.argmax(-1).cpu().numpy() if sampling.greedy else draw(distribution(logits[0], sampling), rng)

        runs[context] = run
    timed = profiler.time_interleaved(runs, target.device, repeats, advance=advance)
    return [sample_record("greedy", 1, context, samples) for context, samples in timed.items()]


@torch.inference_mode()
def prefill_latency(target: LoadedModel, lengths, repeats: int, advance: Callable[..., None]) -> list[dict]:
    """The prompt's forward pass, as the engine prefills a row (end-to-end speedups include it)."""
    vocab = target.model.config.vocab_size
    target_head = base_and_head(target.model)[1]

    def prefill(ids: torch.Tensor) -> Callable[[], None]:
        def run() -> None:
            hidden, _ = TargetRows(target, 1, len(ids)).prefill(0, ids)
            int(head_logits(target_head, hidden[-1:]).argmax(-1))
        return run

    runs = {length: prefill(profiler._context_ids(length, vocab, target.device)) for length in lengths}
    timed = profiler.time_interleaved(runs, target.device, repeats, advance=advance)
    return [sample_record("prefill", length, 0, samples) for length, samples in timed.items()]


def bookkeeping_latency(sizes, depths, width: int, repeats: int, advance: Callable[..., None],
                        seed: int = 0, sampling: Sampling = GREEDY, vocab: int = 49152) -> list[dict]:
    """The engine's host-side work per cycle without the models: grow a (depth, width) tree from fixed
    log-probs, feed its frontiers, select and flatten ``size`` nodes, find the accepted path; the
    same code as a live cycle. At T > 0 the path comes from the sampling walk (``TreeVerifier``)
    over fixed random logits, each of the root's verified children tried and rejected: about the
    work of a live walk, which accepts a child or two and rejects fewer siblings."""
    rng = np.random.default_rng(seed)
    walker, walk_rng = TreeVerifier(), np.random.default_rng(seed)
    logits = torch.randn(max(sizes), vocab, generator=torch.Generator().manual_seed(seed)) * 3

    def cycle(depth: int, size: int, levels: list, tokens: list) -> Callable[[], None]:
        def run() -> None:
            tree = DraftTree(0, depth, width)
            for i, (lp, tk) in enumerate(zip(levels, tokens)):
                if i:
                    tree.feed_frontier()
                tree.grow(lp, tk)
            verification = tree.verification(size)
            if sampling.greedy:
                verification.accept(verification.tokens)
            else:
                walker.accept(verification.tokens, verification.parent_rows, row_distributions(logits, sampling),
                              walk_rng)
        return run

    runs = {}
    for depth in depths:
        levels = [np.sort(rng.standard_normal((1 if i == 0 else width, width)) - 2.0, axis=1)[:, ::-1]
                  for i in range(depth - 1)]
        tokens = [rng.integers(0, vocab, size=lp.shape) for lp in levels]
        runs.update({(depth, size): cycle(depth, size, levels, tokens) for size in sizes})
    # Interleaved, as the forwards are: timed point by point, a slow minute of a shared machine
    # lands on a block of (size, depth) points and bends the curve there.
    timed = profiler.time_interleaved(runs, torch.device("cpu"), repeats, advance=advance)
    return [sample_record("bookkeeping", size, depth, samples) for (depth, size), samples in timed.items()]


def measure_curves(target: LoadedModel, drafter: Drafter, grid: CurveGrid, advance: Callable[[], None],
                   sampling: Sampling = GREEDY, runtime: str = "eager") -> list[dict]:
    """Every curve on the device (at T > 0 with sampling's host work); ``runtime``: how the target's
    forwards run (the prefill and the drafter run eagerly)."""
    vocab = target.model.config.vocab_size
    # compiled: a forward costs what its padded bucket costs (the cost model prices V at its bucket)
    step = {"bucketed": True} if runtime == "compiled" else {}
    verify = profiler.target_latency(target, grid.verify_sizes, grid.contexts, grid.repeats, advance, runtime)
    samples = [sample_record("verify", r.tokens, r.context, r.samples) | step for r in verify]
    samples += [sample_record("draft", r.tokens, r.context, r.samples) for r in profiler.draft_latency(
        drafter, vocab, grid.draft_nodes, grid.contexts, grid.repeats, target.device, advance)]
    samples += greedy_latency(target, grid.greedy_contexts, grid.repeats, advance, sampling, runtime)
    samples += prefill_latency(target, grid.prefill_lengths, grid.repeats, advance)
    samples += bookkeeping_latency(grid.book_sizes, grid.book_depths, grid.book_width, grid.book_repeats, advance,
                                   sampling=sampling, vocab=vocab)
    return samples


@dataclass(frozen=True)
class BatchGrid:
    """Operating points at B > 1: fewer verify sizes; each draft width also with 1 to B - 1 rows drafting."""

    verify_sizes: tuple[int, ...] = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
    draft_nodes: tuple[int, ...] = tuple(range(1, 17))
    contexts: tuple[int, ...] = (64, 320)
    repeats: int = 5

    def covering(self, longest: int) -> BatchGrid:
        return replace(self, contexts=reach(self.contexts, longest))

    def count(self, batches) -> int:
        batched = len([b for b in batches if b > 1])
        return (len(self.verify_sizes) + len(self.draft_nodes)) * len(self.contexts) * batched


def measure_batched(target: LoadedModel, drafter: Drafter, batches, grid: BatchGrid, advance: Callable[..., None]
                    ) -> list[dict]:
    """Verify, plain-step and draft curves at each B > 1, through the engine's own batched target and drafter."""
    vocab = target.model.config.vocab_size
    samples = []
    for batch in (b for b in batches if b != 1):
        for r in profiler.target_latency(target, grid.verify_sizes, grid.contexts, grid.repeats, advance,
                                         batch=batch):
            samples.append(sample_record("verify", r.tokens, r.context, r.samples, batch))
            if r.tokens == 1:
                samples.append(sample_record("greedy", 1, r.context, r.samples, batch))
        for rows, r in profiler.batched_draft_latency(drafter, vocab, batch, grid.draft_nodes, grid.contexts,
                                                      grid.repeats, target.device, advance, active=range(1, batch)):
            samples.append(sample_record("draft", r.tokens, r.context, r.samples, batch, rows))
    return samples


def analytic_batched(device: DeviceSpec, target: Architecture, draft: Architecture, batches, grid: BatchGrid
                     ) -> list[dict]:
    """The same points from the roofline model at each batch size B > 1."""
    samples = []
    for batch in (b for b in batches if b != 1):
        for c in grid.contexts:
            samples += [sample_record("verify", v, c, [forward_seconds(device, target, v, c, batch)], batch)
                        for v in grid.verify_sizes]
            samples.append(sample_record("greedy", 1, c, [forward_seconds(device, target, 1, c, batch)], batch))
            samples += [sample_record("draft", n, c, [forward_seconds(device, draft, n, c, batch)], batch)
                        for n in grid.draft_nodes]
    return samples


def analytic_curves(device: DeviceSpec, target: Architecture, draft: Architecture, grid: CurveGrid,
                    host_bookkeeping: list[dict]) -> list[dict]:
    """The same operating points from the roofline model, with the host's bookkeeping measured here."""
    samples = [sample_record("verify", v, c, [forward_seconds(device, target, v, c)])
               for c in grid.contexts for v in grid.verify_sizes]
    samples += [sample_record("draft", n, c, [forward_seconds(device, draft, n, c)])
                for c in grid.contexts for n in grid.draft_nodes]
    samples += [sample_record("greedy", 1, c, [forward_seconds(device, target, 1, c)]) for c in grid.greedy_contexts]
    samples += [sample_record("prefill", n, 0, [forward_seconds(device, target, n, 0)]) for n in grid.prefill_lengths]
    return samples + host_bookkeeping


def drafter_architecture(drafter: Drafter, bytes_per_param: int = 2) -> Architecture:
    """The shapes an analytic model of ``drafter``'s step needs (reduced vocabulary included)."""
    from simspec.engine.formats import config_shapes, head_shapes

    cfg = getattr(getattr(drafter, "head", None), "cfg", None)
    if cfg is not None:  # EAGLE-style: [feature ; embedding] -> linear -> one decoder layer -> head
        shapes = head_shapes(cfg.hidden, cfg.heads, cfg.kv_heads, cfg.intermediate, cfg.draft_vocab)
    else:
        vocab = None if drafter.draft_vocab is None else len(drafter.draft_vocab)
        shapes = config_shapes(drafter.model.config, vocab=vocab)
    return Architecture(**shapes, bytes_per_param=bytes_per_param)


def target_architecture(config) -> Architecture:
    """A target's shapes from its transformers config (a loaded model's, or one read alone)."""
    from simspec.engine.formats import config_shapes

    return Architecture(**config_shapes(config))


def pair_shapes(target: str, draft: str) -> tuple[Architecture, Architecture] | None:
    """The target's and the drafter's shapes from their configs alone (an 8B target's weights stay on
    disk); None where they cannot be read so: load the pair, whose loader says what is wrong."""
    from simspec.engine.load import resolve_drafter
    from simspec.engine.models import model_config

    fmt, source = resolve_drafter(draft)
    if fmt.shapes is None:
        return None
    try:
        target_config = model_config(target)
        return target_architecture(target_config), Architecture(**fmt.shapes(source, target_config))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
