"""Cycle cost model: latency curves fitted to measurements (numpy only).

A curve maps (n, L) to seconds: n the tokens the operation processes (V for ``verify`` and
``bookkeeping``, nodes fed for ``draft``, 1 for ``greedy``, prompt tokens for ``prefill`` at
context 0) and L the context length (the tree depth D for ``bookkeeping``). Two fits are tried
and the one with the lower held-out error is kept:

- ``interp``: piecewise-linear in n through the measured medians at each measured L, linear
  in L between measured contexts (and beyond them, along the last segment). Follows the steps
  a GPU's verify curve has, as long as the grid is dense.
- ``affine``: least squares ``a + b n + c L + d n L``. Smooth; right for CPUs, wrong at steps.

The held-out error is measured on points never used for fitting, chosen where the cost model
interpolates when it prices a cycle, since a measured point is read back, not predicted:
- in n, every third interior point at each context where the grid has a gap (a point whose
  measured neighbours are not n - 1 and n + 1), predicted from the rest;
- in L, every other interior context with all its points, predicted from the other contexts.
The relative errors ``|fit - measured| / measured``, pooled, give the median and p90 reported.
A run of consecutive sizes is not held out in n: there the curve may step from one size to the
next (a CPU kernel's row blocking), which no fit predicts and none needs to (all are measured).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.shapes import next_power_of_two  # the compiled runtime's buckets

KINDS = ("verify", "draft", "greedy", "prefill", "bookkeeping")


@dataclass(frozen=True)
class Point:
    kind: str
    n: int
    context: int
    median: float
    batch: int = 1  # sequences in the forward pass (``calibrate --batch-sizes``); n and context per sequence
    rows: int | None = None  # of those, the ones a draft level runs for (None: all of them)


class Curve:
    """One fitted latency curve for one kind of operation."""

    def __init__(self, method: str, n: np.ndarray, context: np.ndarray, seconds: np.ndarray,
                 bucketed: bool = False) -> None:
        """``bucketed``: n is priced at its next power of two (the compiled runtime's shape buckets)."""
        self.method = method
        self.bucketed = bucketed
        n = next_power_of_two(n) if bucketed else n
        self.contexts = np.unique(context)
        self._grids = []
        for c in self.contexts:
            at = context == c
            xs, which = np.unique(n[at], return_inverse=True)  # sorted; sizes sharing a bucket: their mean
            self._grids.append((xs.astype(float), np.bincount(which, seconds[at]) / np.bincount(which)))
        if method == "affine":
            design = np.stack([np.ones_like(n), n, context, n * context], axis=1).astype(float)
            self._coef, *_ = np.linalg.lstsq(design, seconds, rcond=None)

    def _interp_at_context(self, i: int, n: np.ndarray) -> np.ndarray:
        xs, ys = self._grids[i]
        if len(xs) == 1:
            return np.full_like(n, ys[0], dtype=float)
        inside = np.interp(n, xs, ys)
        # Beyond the measured range: continue the end segments' slopes, never flat-line.
        left = ys[0] + (n - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
        right = ys[-1] + (n - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return np.where(n < xs[0], left, np.where(n > xs[-1], right, inside))

    def __call__(self, n, context) -> np.ndarray:
        n, context = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(context, dtype=float))
        if self.bucketed:
            n = next_power_of_two(n)
        if self.method == "affine":
            a, b, c, d = self._coef
            return np.maximum(a + b * n + c * context + d * n * context, 1e-9)
        if len(self.contexts) == 1:
            return np.maximum(self._interp_at_context(0, n), 1e-9)
        # Linear in L between the two bracketing measured contexts (end pair outside).
        hi = np.clip(np.searchsorted(self.contexts, context), 1, len(self.contexts) - 1)
        lo = hi - 1
        out = np.empty(n.shape)
        for i in np.unique(lo):
            sel = lo == i
            c0, c1 = self.contexts[i], self.contexts[i + 1]
            y0, y1 = self._interp_at_context(i, n[sel]), self._interp_at_context(i + 1, n[sel])
            out[sel] = y0 + (context[sel] - c0) * (y1 - y0) / (c1 - c0)
        return np.maximum(out, 1e-9)


def holdout_folds(n: np.ndarray, context: np.ndarray) -> list[np.ndarray]:
    """Masks of points held out together (module docstring): the size fold, then the context fold."""
    by_size = np.zeros(len(n), dtype=bool)
    for c in np.unique(context):
        idx = np.flatnonzero(context == c)
        idx = idx[np.argsort(n[idx])]
        gaps = [i for k, i in enumerate(idx[1:-1], 1) if n[idx[k + 1]] - n[idx[k - 1]] > 2]
        by_size[gaps[1::3]] = True
    by_context = np.isin(context, np.unique(context)[1:-1][::2])
    return [fold for fold in (by_size, by_context) if fold.any() and (~fold).sum() >= 2]


def fit_curve(points: list[Point], interpolate: bool = False, bucketed: bool = False) -> tuple[Curve, dict]:
    """One kind's curve (refitted on all points) and its held-out report. ``interpolate``: the points
    are another model's values (an in-situ refit): pass through them."""
    n = np.array([p.n for p in points], dtype=float)
    context = np.array([p.context for p in points], dtype=float)
    seconds = np.array([p.median for p in points])
    if interpolate:
        return Curve("interp", n, context, seconds, bucketed), {
            "points": len(points), "method": "interp", "note": "a refitted model's values: interpolated, not fitted"}
    folds = holdout_folds(n, context)
    report: dict = {"points": len(points), "held_out": int(sum(f.sum() for f in folds))}
    if not folds:
        report.update(method="interp", note="too few points to hold any out")
        return Curve("interp", n, context, seconds, bucketed), report
    errors = {}
    for method in ("interp", "affine"):
        errors[method] = rel = np.concatenate([np.abs(Curve(method, n[~held], context[~held], seconds[~held], bucketed)(
            n[held], context[held]) - seconds[held]) / seconds[held] for held in folds])
        report[method] = {"median": float(np.median(rel)), "p90": float(np.percentile(rel, 90)),
                          "max": float(rel.max()), "errors": [round(float(e), 5) for e in rel]}
    best = min(errors, key=lambda m: (np.median(errors[m]), np.percentile(errors[m], 90)))
    report["method"] = best
    return Curve(best, n, context, seconds, bucketed), report


class CostModel:
    """Latency of every part of a cycle, from a profile's measurements."""

    def __init__(self, points: list[Point], interpolate: frozenset = frozenset(),
                 bucketed: frozenset[str] = frozenset()) -> None:
        """``interpolate``: kinds (or (kind, batch size) pairs) whose points are interpolated, never
        fitted; ``bucketed``: kinds priced at their shape bucket (``Curve``)."""
        self.curves: dict[str, Curve] = {}
        self.report: dict[str, dict] = {}
        self._tables: dict[str | tuple[str, int], np.ndarray] = {}
        self._batches: dict[int, CostModel] = {}  # at_batch's models, fitted once
        self._alone: CostModel | None = None  # at_batch's models: batch 1's, which prefills each prompt alone
        self._points = list(points)
        self._interpolate = frozenset(interpolate)
        self._bucketed = frozenset(bucketed)
        self.batch_sizes = sorted({p.batch for p in points} | {1})
        for kind in KINDS:
            mine = [p for p in points if p.kind == kind and p.batch == 1 and p.rows is None]
            if mine:
                self.curves[kind], self.report[kind] = fit_curve(mine, self._interpolated(kind, 1),
                                                                 kind in self._bucketed)
        # A batch's draft levels after some rows stopped drafting (``at_batch``'s models): the
        # padded forward still runs every row, the draft head's scoring only the drafting ones.
        partial = [p for p in points if p.kind == "draft" and p.batch == 1 and p.rows is not None]
        self._draft_rows = {rows: fit_curve([p for p in partial if p.rows == rows])[0]
                            for rows in sorted({p.rows for p in partial})}
        missing = [k for k in ("verify", "draft") if k not in self.curves]
        if missing:
            raise ValueError(f"a cost model needs verify and draft measurements; missing {missing}")

    def at_batch(self, batch: int) -> CostModel:
        """The cost model of one sequence in a batch of ``batch`` sharing every cycle: verify, draft and
        plain steps from the curves at that size; bookkeeping ``batch`` times batch 1's unless held at
        that size (an in-situ refit); the prefill batch 1's."""
        if batch == 1:
            return self
        if batch not in self.batch_sizes:
            raise SimspecError(f"the profile has no curves at batch size {batch} (it has "
                               f"{', '.join(map(str, self.batch_sizes))}): measure them with `simspec calibrate "
                               f"--batch-sizes 1,{batch}`, or choose a measured batch size")
        if batch not in self._batches:
            held = {p.kind for p in self._points if p.batch == batch} - {"prefill"}
            points = [Point(p.kind, p.n, p.context, p.median, 1, p.rows) for p in self._points if p.batch == batch
                      and p.kind in held]
            points += [Point(p.kind, p.n, p.context, p.median * (batch if p.kind == "bookkeeping" else 1))
                       for p in self._points if p.batch == 1 and p.kind not in held]
            interpolate = frozenset(k for k in KINDS if self._interpolated(k, batch if k in held else 1))
            self._batches[batch] = CostModel(points, interpolate, self._bucketed)
            self._batches[batch]._alone = self
        return self._batches[batch]

    def _interpolated(self, kind: str, batch: int) -> bool:
        return kind in self._interpolate or (kind, batch) in self._interpolate

    def verify(self, size, context) -> np.ndarray:
        return self.curves["verify"](size, context)

    def draft(self, nodes, context) -> np.ndarray:
        return self.curves["draft"](nodes, context)

    def draft_rows(self, rows: np.ndarray, nodes: np.ndarray, context: np.ndarray) -> np.ndarray:
        """Draft steps in which ``rows`` of the batch draft, where the profile measured that count; else
        the whole batch's step. Integer operating points, looked up in tables."""
        n_max, c_max = int(nodes.max(initial=1)), int(context.max(initial=1))
        out = self.table("draft", n_max, c_max)[nodes, context]
        for count, curve in self._draft_rows.items():
            some = rows == count
            if some.any():
                out[some] = self._tabulate(("draft", count), curve, n_max, c_max)[nodes[some], context[some]]
        return out

    def greedy(self, context) -> np.ndarray:
        return (self.curves.get("greedy") or self.curves["verify"])(1, context)

    def greedy_steps(self, context: np.ndarray) -> np.ndarray:
        """``greedy`` at integer contexts, looked up in a table of the curve (replay's plain queue)."""
        kind = "greedy" if "greedy" in self.curves else "verify"
        return self.table(kind, 1, int(context.max(initial=1)))[1, context]

    def prefill(self, prompt_tokens) -> np.ndarray:
        """The prompt's forward pass, alone (batch 1's); without a prefill curve, verify's from context 0."""
        if self._alone is not None:
            return self._alone.prefill(prompt_tokens)
        return (self.curves.get("prefill") or self.curves["verify"])(prompt_tokens, 0)

    def bookkeeping(self, size, depth) -> np.ndarray:
        """The engine's host-side work per cycle for ``size`` tokens of a ``depth``-level tree (its
        curve's context axis is the depth)."""
        curve = self.curves.get("bookkeeping")
        return np.zeros(np.broadcast(size, depth).shape) if curve is None else curve(size, depth)

    def table(self, kind: str, n_max: int, c_max: int) -> np.ndarray | None:
        """The curve at every integer (n, context) up to the given extents, grown on demand."""
        return None if kind not in self.curves else self._tabulate(kind, self.curves[kind], n_max, c_max)

    def _tabulate(self, key: str | tuple[str, int], curve: Curve, n_max: int, c_max: int) -> np.ndarray:
        table = self._tables.get(key)
        if table is None or table.shape[0] <= n_max or table.shape[1] <= c_max:
            rows, cols = (1 << int(max(x, 1)).bit_length() for x in (n_max, c_max))
            table = curve(np.arange(rows)[:, None], np.arange(cols)[None, :])
            self._tables[key] = table
        return table

    def fed_draft(self, committed: np.ndarray, context: np.ndarray) -> np.ndarray:
        """The first draft call of a cycle at integer points, fed the last cycle's ``committed`` tokens:
        what ``cycle`` adds for it to a tree of two or more levels (the oracle's committed axis)."""
        return self.table("draft", int(committed.max()), int(context.max()))[committed, context]

    def cycle(self, depth, width, size, context, committed) -> np.ndarray:
        """Seconds of one cycle: the first draft call (fed the last cycle's ``committed`` tokens),
        ``depth - 2`` calls of ``width`` nodes, the verification of ``size`` tokens and the
        bookkeeping. Depth 1 is a plain step. Integer operating points are looked up in tables."""
        depth, width, size, context, committed = (np.asarray(x) for x in (depth, width, size, context, committed))
        shape = np.broadcast_shapes(*(x.shape for x in (depth, width, size, context, committed)))
        if all(np.issubdtype(x.dtype, np.integer) for x in (depth, width, size, context, committed)) and all(shape):
            # Each term indexed at its own operands' shape (the oracle's [prompts, options, committed]
            # grid is one sum of small arrays, not five gathers over the whole of it).
            c_max = int(context.max())
            draft = self.table("draft", int(max(committed.max(), width.max())), c_max)
            verify = self.table("verify", int(size.max()), c_max)
            drafting = np.where(depth >= 2, draft[committed, context], 0.0) \
                + np.maximum(depth - 2, 0) * draft[width, context]
            book = self.table("bookkeeping", int(size.max()), int(depth.max()))
            spent = drafting + verify[size, context] + (0.0 if book is None else book[size, depth])
            out = np.where(depth == 1, self.greedy_steps(context), spent)
            return out if out.shape == shape else np.broadcast_to(out, shape).copy()
        depth, width, size, context, committed = (x.astype(float) for x in np.broadcast_arrays(
            depth, width, size, context, committed))
        drafting = np.where(depth >= 2, self.draft(committed, context)
                            + np.maximum(depth - 2, 0) * self.draft(width, context), 0.0)
        spent = drafting + self.verify(size, context) + self.bookkeeping(size, depth)
        return np.where(depth == 1, self.greedy(context), spent)

    def fit_error(self) -> dict:
        """Held-out relative errors of the kept fits, pooled over every curve."""
        rel = [e for rep in self.report.values() if rep.get("method") in rep for e in rep[rep["method"]]["errors"]]
        if not rel:
            return {"median": float("nan"), "p90": float("nan"), "points": 0}
        return {"median": float(np.median(rel)), "p90": float(np.percentile(rel, 90)), "points": len(rel)}
