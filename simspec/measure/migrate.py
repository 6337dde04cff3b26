"""``simspec migrate-traces``: trace folders recorded before traces held the prompts' token ids
(read by ``load --live`` and the token-cache rules: each prompt rendered again, to its recorded
length) or the greedy path's child ranks (what fixed-shape trees replay from: each greedy
continuation walked again as ``record`` walks it), brought up to date in place. Neither array is
in the content hash (``DERIVED_ARRAYS``), so what was built on the traces stays valid; the hash
is checked unchanged before the files are replaced, and an interrupted run resumes when rerun."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from simspec import __version__, flags
from simspec.errors import SimspecError
from simspec.flags import opt


@dataclass(frozen=True, kw_only=True)
class MigrateRequest:
    traces: tuple[str, ...] = opt(help="Trace folders to bring up to date, comma-separated (each holds traces.json "
                                  "and traces.npz).", parse=flags.names)

    def __post_init__(self):
        if not self.traces:
            raise SimspecError("--traces names no folder: pass one or more trace folders, comma-separated")


def run(request: MigrateRequest, bar, status) -> dict:
    """Every folder of ``request``: what it lacked and was given, and its (unchanged) hash."""
    from simspec.sim.trace_files import load_traces

    folders = []
    for folder in map(Path, request.traces):
        if not (folder / "traces.json").is_file():  # never the shipped copy a relative name may resolve to
            raise SimspecError(f"no trace folder at {folder} (no traces.json there): pass a folder that "
                               "`simspec calibrate` wrote")
        folders.append((folder, load_traces(folder)))  # every folder checked before any is changed
    done = []
    for folder, traces in folders:
        lacks = [name for name, missing in (("prompt tokens", not traces.has_prompt_tokens),
                                            ("child ranks", not traces.sampled and traces.child_rank.shape[1] == 0))
                 if missing]
        if lacks:
            with status(f"{folder}: loading {traces.meta.target}"):
                from simspec.engine.models import load_model  # torch: only where a folder needs a model

                target = load_model(traces.meta.target, dtype=traces.meta.dtype)
            tokens = _prompt_tokens(folder, traces, target) if "prompt tokens" in lacks else traces.prompt_tokens
            updated = replace(traces, prompt_tokens=tokens)
            if "child ranks" in lacks:
                updated = replace(updated, child_rank=_child_ranks(updated, target, bar(f"{folder}: child ranks",
                                                                                        traces.n_prompts)))
            _save_in_place(folder, updated)
        done.append({"traces": str(folder), "added": lacks, "content_hash": traces.meta.content_hash,
                     "prompts": traces.n_prompts, "positions": traces.positions})
    return {"simspec_version": __version__, "folders": done}


def _prompt_tokens(folder: Path, traces, target) -> np.ndarray:
    """Each prompt id's token ids as calibrate renders them, checked against the recorded lengths."""
    from simspec.data import DataError, load_prompts, render_chat

    meta = traces.meta
    try:
        by_id = {p.id: p for p in load_prompts(meta.prompts)}
    except DataError as exc:
        raise SimspecError(f"{folder}: its prompt set {meta.prompts!r} cannot be read ({exc}): install it, or record "
                           "the traces again") from None
    missing = [i for i in meta.prompt_ids if i not in by_id]
    if missing:
        raise SimspecError(f"{folder}: prompt {missing[0]!r} is not in the prompt set {meta.prompts!r} "
                           f"({len(missing)} missing): record the traces again")
    ids = [render_chat(target.tokenizer, by_id[i].text) for i in meta.prompt_ids]
    lengths = np.array([len(i) for i in ids])
    if not np.array_equal(lengths, traces.prompt_lengths):
        bad = int(np.flatnonzero(lengths != traces.prompt_lengths)[0])
        raise SimspecError(f"{folder}: prompt {meta.prompt_ids[bad]!r} renders to {lengths[bad]} tokens, the traces "
                           f"recorded {traces.prompt_lengths[bad]} (another chat template or prompt text): left as "
                           "it was; record the traces again")
    return np.concatenate([np.asarray(i, np.int32) for i in ids])


def _child_ranks(traces, target, advance) -> np.ndarray:
    """The greedy path's child ranks at every position, the prompts walked one by one."""
    from simspec.engine.load import load_drafter
    from simspec.measure.recorder import RecordSpec, TraceRecorder

    spec = RecordSpec(traces.depth_max, traces.width, int(traces.meta.extra("max_new_tokens", 128)))
    recorder = TraceRecorder(target, load_drafter(traces.meta.draft, target), spec)
    rows = []
    for i, prompt in enumerate(traces.prompt_token_lists()):
        n = int(traces.prompt_offsets[i + 1] - traces.prompt_offsets[i])
        rows.append(recorder.child_ranks(prompt.tolist(), traces.continuation(i), n))
        advance()
    return np.concatenate(rows)


def _save_in_place(folder: Path, traces) -> None:
    """``traces`` written beside ``folder`` and moved over its two files, once their hash is checked unchanged."""
    from simspec.sim.trace_files import save_traces
    from simspec.sim.traces import TraceMeta

    before = traces.meta.content_hash
    meta = {k: v for k, v in traces.meta.to_json().items()
            if k not in ("schema", "schema_version", "content_hash", "positions", "n_prompts")}
    with tempfile.TemporaryDirectory(dir=folder, prefix=".migrate.") as tmp:
        staged = Path(tmp)
        after = save_traces(staged, replace(traces, meta=TraceMeta.of(meta)))
        if after != before:
            raise SimspecError(f"{folder}: the migrated traces hash to {after}, not {before}: left as they were")
        os.replace(staged / "traces.npz", folder / "traces.npz")  # the json's hash covers both versions
        os.replace(staged / "traces.json", folder / "traces.json")
