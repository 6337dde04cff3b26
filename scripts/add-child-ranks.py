"""Add the greedy path's child ranks to greedy trace folders recorded before traces held them.

Each prompt's stored continuation is walked again with the traces' own target and drafter, as
``calibrate`` records it (``TraceRecorder.child_ranks``). The content hash does not cover the
ranks (see simspec.sim.traces.DERIVED_ARRAYS), so profiles and policies built on the traces stay
valid. Resumable per folder: a folder that already holds them is skipped.

    .venv/bin/python scripts/add-child-ranks.py calibration/traces-humaneval-eagle
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

from simspec.engine.load import load_drafter
from simspec.engine.models import load_model
from simspec.measure.recorder import RecordSpec, TraceRecorder
from simspec.sim.trace_files import load_traces, save_traces
from simspec.sim.traces import TraceMeta


def main(folders: list[str]) -> None:
    for folder in folders:
        traces = load_traces(Path(folder))
        meta = traces.meta
        if traces.sampled or traces.child_rank.shape[1]:
            print(f"{folder}: {'sampled traces' if traces.sampled else 'child ranks already stored'}; skipped")
            continue
        if not traces.has_prompt_tokens:
            raise SystemExit(f"{folder}: no prompt tokens stored; run scripts/add-prompt-tokens.py first")
        target = load_model(meta.target, dtype=meta.dtype)
        recorder = TraceRecorder(target, load_drafter(meta.draft, target),
                                 RecordSpec(traces.depth_max, traces.width, int(meta.extra("max_new_tokens", 128))))
        starts = np.concatenate([[0], np.cumsum(traces.prompt_lengths)])
        rows, started = [], time.perf_counter()
        for i in range(traces.n_prompts):
            prompt = traces.prompt_tokens[starts[i]:starts[i + 1]].tolist()
            n = int(traces.prompt_offsets[i + 1] - traces.prompt_offsets[i])
            rows.append(recorder.child_ranks(prompt, traces.continuation(i), n))
            if (i + 1) % 10 == 0 or i + 1 == traces.n_prompts:
                print(f"{folder}: {i + 1}/{traces.n_prompts} prompts, {time.perf_counter() - started:.0f} s",
                      flush=True)
        before = meta.content_hash
        traces = load_traces(Path(folder))  # a fresh object: the cached arrays are read-only
        traces.child_rank = np.concatenate(rows)
        traces.meta = TraceMeta.of({k: v for k, v in meta.to_json().items()
                                    if k not in ("schema", "schema_version", "content_hash", "positions", "n_prompts")})
        after = save_traces(Path(folder), traces)
        assert after == before, (folder, before, after)
        print(f"{folder}: child ranks of {traces.positions} positions stored ({torch.get_num_threads()} threads), "
              f"hash {after} unchanged")


if __name__ == "__main__":
    main(sys.argv[1:])
