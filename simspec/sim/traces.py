"""Recorded draft trees: everything replay needs, nothing it does not (numpy only).

For greedy decoding, a cycle's accepted length is fixed by the draft tree and the target's
greedy continuation. A trace set stores, for every prompt, that continuation and, at every
position ``p`` of it (root = continuation token ``p``), the tree the drafter builds to
``depth_max`` levels at ``width``, reduced to two arrays:

``path_rank[p, j - 1, D - 2]`` (int16), for path depth ``j`` in 1..depth_max-1 and tree depth
    ``D`` in 2..depth_max: the rank (0 = best) of the tree node at depth ``j`` on the target's
    greedy path among all non-root nodes of depth < D, in the engine's order (cumulative score
    descending, ties to the shallower then earlier node). ``NO_NODE`` where the greedy path
    leaves the tree before depth ``j`` or where ``j >= D``. Top-V verification keeps the root
    and the V-1 best non-root nodes, a set closed under ancestors, so the accepted length of
    (D, V) is the number of path nodes with rank < V-1: ``accepted_lengths``.
``level_scores[p, l - 1, :]`` (float16), for level ``l`` in 1..depth_max-1: the cumulative
    log-prob scores of the level's nodes, sorted descending (level 1 has W nodes, the rest of
    the row is -inf; every later level holds all W**2 candidates). What LTD's depth policy
    (frontier candidates), its size policy (all node scores) and RADAR (confidences per draft
    call) observe.
``best_child_logprobs[p, l - 1, :]`` (float16): the conditional log-probs of the W children
    of level l-1's best node (the root for l = 1), best first: the draft's confidence along
    its most likely path, which entropy- and confidence-based stopping rules (SVIP, RADAR) read.

Plus ``context_length[p]`` (prompt + accepted tokens before the root) and per-prompt offsets.
Trees are drafted one position at a time, as if every earlier cycle had accepted nothing; a
drafter's state depends on the committed tokens only, not on how they were committed, up to
floating-point rounding (the replay check in ``simspec calibrate`` measures the consequence).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simspec.errors import SimspecError, read_json, require, require_schema
from simspec.shipped import locate

TRACE_SCHEMA = "simspec-traces"
TRACE_VERSION = 1
NO_NODE = np.iinfo(np.int16).max
ARRAYS = ("prompt_offsets", "tokens", "token_offsets", "prompt_lengths", "context_length", "path_rank",
          "level_scores", "best_child_logprobs")


@dataclass
class TraceSet:
    prompt_offsets: np.ndarray  # [n_prompts + 1] into the position axis
    tokens: np.ndarray  # greedy continuations, concatenated (int32)
    token_offsets: np.ndarray  # [n_prompts + 1] into ``tokens``
    prompt_lengths: np.ndarray  # [n_prompts]
    context_length: np.ndarray  # [positions] int32
    path_rank: np.ndarray  # [positions, depth_max - 1, depth_max - 1] int16
    level_scores: np.ndarray  # [positions, depth_max - 1, width**2] float16
    best_child_logprobs: np.ndarray  # [positions, depth_max - 1, width] float16
    meta: dict = field(default_factory=dict)

    @property
    def depth_max(self) -> int:
        return self.path_rank.shape[1] + 1

    @property
    def width(self) -> int:
        return int(self.meta["width"])

    @property
    def n_prompts(self) -> int:
        return len(self.prompt_offsets) - 1

    @property
    def positions(self) -> int:
        return len(self.context_length)

    def prompt_positions(self, i: int) -> slice:
        return slice(int(self.prompt_offsets[i]), int(self.prompt_offsets[i + 1]))

    def continuation(self, i: int) -> np.ndarray:
        return self.tokens[self.token_offsets[i]:self.token_offsets[i + 1]]

    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for name in ARRAYS:
            array = np.ascontiguousarray(getattr(self, name))
            digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
            digest.update(array.tobytes())
        return digest.hexdigest()[:16]

    def subset(self, prompts: np.ndarray) -> "TraceSet":
        """The traces of the given prompt indices (in that order)."""
        pos = np.concatenate([np.arange(self.prompt_offsets[i], self.prompt_offsets[i + 1]) for i in prompts])
        tok = np.concatenate([np.arange(self.token_offsets[i], self.token_offsets[i + 1]) for i in prompts])
        counts = np.diff(self.prompt_offsets)[prompts]
        tcounts = np.diff(self.token_offsets)[prompts]
        meta = dict(self.meta)
        for key in ("prompt_ids", "splits"):
            if key in meta:
                meta[key] = [meta[key][i] for i in prompts]
        return TraceSet(np.concatenate([[0], np.cumsum(counts)]), self.tokens[tok],
                        np.concatenate([[0], np.cumsum(tcounts)]), self.prompt_lengths[prompts],
                        self.context_length[pos], self.path_rank[pos], self.level_scores[pos],
                        self.best_child_logprobs[pos], meta)


def accepted_lengths(path_rank: np.ndarray, depth: np.ndarray | int, size: np.ndarray | int) -> np.ndarray:
    """Accepted draft tokens for trees of ``depth`` levels verified at ``size`` nodes (root
    included), one per row of ``path_rank`` ([n, depth_max-1, depth_max-1]). Vectorised;
    ``depth`` and ``size`` broadcast against the rows. Depth 1 drafts nothing: 0."""
    n = path_rank.shape[0]
    return accepted_at(path_rank, np.arange(n), np.broadcast_to(np.asarray(depth), (n,)),
                       np.broadcast_to(np.asarray(size), (n,)))


def accepted_at(path_rank: np.ndarray, rows: np.ndarray, depth: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``accepted_lengths(path_rank[rows], depth, size)`` without copying whole tables: one
    gather of the column each row needs (the replay hot path)."""
    levels = path_rank.shape[1]
    column = np.clip(depth - 2, 0, levels - 1)
    ranks = path_rank[rows[:, None], np.arange(levels)[None, :], column[:, None]]
    accepted = (ranks < (size - 1)[:, None]).sum(axis=1)
    return np.where(depth >= 2, accepted, 0)


def save_traces(directory: Path, traces: TraceSet) -> str:
    """Write ``traces.npz`` and ``traces.json`` (meta with schema, hash); returns the hash."""
    directory.mkdir(parents=True, exist_ok=True)
    content = traces.content_hash()
    np.savez_compressed(directory / "traces.npz", **{name: getattr(traces, name) for name in ARRAYS})
    meta = {"schema": TRACE_SCHEMA, "schema_version": TRACE_VERSION, **traces.meta, "content_hash": content,
            "positions": traces.positions, "n_prompts": traces.n_prompts}
    (directory / "traces.json").write_text(json.dumps(meta, indent=1))
    traces.meta = meta
    return content


def record_again(directory: Path, meta: dict | None = None) -> str:
    """What to do about unusable traces: restore them, or record them again into the same
    folder (with the models and prompts they were recorded with, when their meta says)."""
    meta = meta if isinstance(meta, dict) else {}
    flags = "".join(f" --{flag} {meta[key]}" for flag, key in (("target", "target"), ("draft", "draft"),
                                                               ("prompts", "prompts"))
                    if isinstance(meta.get(key), str))
    return (f"restore the folder, or record the traces again with `simspec calibrate --traces-only{flags} "
            f"--out {directory} --force`")


# name -> (integer or floating kind, number of dimensions)
ARRAY_SHAPES = {"prompt_offsets": ("i", 1), "tokens": ("i", 1), "token_offsets": ("i", 1), "prompt_lengths": ("i", 1),
                "context_length": ("i", 1), "path_rank": ("i", 3), "level_scores": ("f", 3),
                "best_child_logprobs": ("f", 3)}


def _check_arrays(arrays: dict[str, np.ndarray], meta: dict, data_file: Path, fix: str) -> None:
    """The arrays fit together (kinds, dimensions, lengths), so that replay cannot index out
    of them: one error naming the array at fault otherwise."""
    def bad(name: str, why: str) -> SimspecError:
        return SimspecError(f"traces {data_file}: array '{name}' {why}: {fix}")

    for name, (kind, ndim) in ARRAY_SHAPES.items():
        array = arrays[name]
        if array.dtype.kind not in ((kind, "u") if kind == "i" else (kind,)) or array.ndim != ndim:
            raise bad(name, f"must be a {ndim}-D {'integer' if kind == 'i' else 'float'} array "
                            f"(found {array.ndim}-D {array.dtype})")
    positions = len(arrays["context_length"])
    n = len(arrays["prompt_lengths"])
    levels = arrays["path_rank"].shape[1]
    width = meta["width"]
    expected = {"prompt_offsets": (n + 1,), "token_offsets": (n + 1,), "path_rank": (positions, levels, levels),
                "level_scores": (positions, levels, width * width), "best_child_logprobs": (positions, levels, width)}
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            raise bad(name, f"has shape {arrays[name].shape}, not {shape}")
    for name, end in (("prompt_offsets", positions), ("token_offsets", len(arrays["tokens"]))):
        offsets = arrays[name]
        if offsets[0] != 0 or offsets[-1] != end or np.any(np.diff(offsets) < 0):
            raise bad(name, f"must rise from 0 to {end}")
    for key in ("splits", "prompt_ids"):
        if key in meta and (not isinstance(meta[key], list) or len(meta[key]) != n):
            raise SimspecError(f"{data_file.with_suffix('.json')}: field '{key}' must be a list of {n} entries, one "
                               f"per prompt: {fix}")


def load_traces(directory: Path, verify_hash: bool = True) -> TraceSet:
    """A trace folder (a relative one that is not here: the shipped copy, see ``simspec.shipped``);
    one clear error, naming the file and what to do, for anything unusable."""
    directory = locate(directory)
    meta_file, data_file = Path(directory) / "traces.json", Path(directory) / "traces.npz"
    meta = read_json(meta_file, "traces ", f"no traces at {directory} (missing traces.json): record them with "
                     f"`simspec calibrate --traces-only --out {directory}`", record_again(directory))
    fix = record_again(directory, meta)
    require_schema(meta, TRACE_SCHEMA, TRACE_VERSION, meta_file, fix)
    require(meta, "content_hash", str, meta_file, fix)
    require(meta, "width", int, meta_file, fix)
    for field in ("target", "draft", "prompts"):
        require(meta, field, str, meta_file, fix, optional=True)
    try:
        with open(data_file, "rb") as handle:  # closed even when the archive is bad
            blob = np.load(handle)
            if not isinstance(blob, np.lib.npyio.NpzFile):
                raise ValueError("one array, not an archive of them")
            with blob:
                lacking = [name for name in ARRAYS if name not in blob.files]
                if lacking:
                    raise SimspecError(f"traces {data_file} are missing or corrupt (no array "
                                       f"{', '.join(lacking)}): {fix}")
                arrays = {name: blob[name] for name in ARRAYS}
    except FileNotFoundError:
        raise SimspecError(f"traces {data_file} are missing: {fix}") from None
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as exc:
        detail = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ""
        raise SimspecError(f"traces {data_file} are missing or corrupt ({exc.__class__.__name__}"
                           f"{': ' + detail if detail else ''}): {fix}") from None
    _check_arrays(arrays, meta, data_file, fix)
    traces = TraceSet(**arrays, meta=meta)
    if verify_hash and traces.content_hash() != meta.get("content_hash"):
        raise SimspecError(f"traces in {directory} do not match their recorded hash: the files were altered; {fix}")
    return traces


@dataclass
class PromptTrace:
    continuation: np.ndarray  # greedy tokens, the first one from the prefill
    context_length: np.ndarray  # [positions]
    path_rank: np.ndarray  # [positions, depth_max - 1, depth_max - 1]
    level_scores: np.ndarray  # [positions, depth_max - 1, width**2]
    best_child_logprobs: np.ndarray  # [positions, depth_max - 1, width]
    near_tie_cut: bool  # the batched continuation disagreed with the checking pass and was cut there


def assemble(traces: list[PromptTrace], prompt_lengths: list[int], meta: dict) -> TraceSet:
    counts = [len(t.context_length) for t in traces]
    tcounts = [len(t.continuation) for t in traces]
    levels = meta["depth_max"] - 1
    width2 = meta["width"] ** 2
    return TraceSet(
        prompt_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        tokens=np.concatenate([t.continuation for t in traces] + [np.zeros(0)]).astype(np.int32),
        token_offsets=np.concatenate([[0], np.cumsum(tcounts)]).astype(np.int64),
        prompt_lengths=np.asarray(prompt_lengths, dtype=np.int32),
        context_length=np.concatenate([t.context_length for t in traces] + [np.zeros(0)]).astype(np.int32),
        path_rank=np.concatenate([t.path_rank for t in traces] + [np.zeros((0, levels, levels), np.int16)]),
        level_scores=np.concatenate([t.level_scores for t in traces] + [np.zeros((0, levels, width2), np.float16)]),
        best_child_logprobs=np.concatenate([t.best_child_logprobs for t in traces]
                                           + [np.zeros((0, levels, meta["width"]), np.float16)]),
        meta=meta,
    )
