"""A trace folder on disk: ``traces.npz`` (the arrays ``simspec.sim.traces`` describes) and
``traces.json`` (meta: schema, content hash, models, prompts, splits). Loading checks every
array's kind, rank and length against the others, so that replay cannot index out of them."""

from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from simspec.errors import SimspecError, read_json
from simspec.shipped import locate
from simspec.sim.traces import ARRAYS, DERIVED_ARRAYS, NODE_DTYPES, TRACE_SCHEMA, TRACE_VERSION, TraceMeta, TraceSet


@dataclass(frozen=True, kw_only=True)
class StoredTraceMeta(TraceMeta):
    """A saved trace folder's meta, which carries the arrays' content hash."""

    content_hash: str = field()  # a bare annotation would inherit TraceMeta's default


def save_traces(directory: Path, traces: TraceSet) -> str:
    """Write ``traces.npz`` and ``traces.json`` (meta with schema, hash); returns the hash."""
    directory.mkdir(parents=True, exist_ok=True)
    content = traces.content_hash()
    np.savez_compressed(directory / "traces.npz",
                        **{name: getattr(traces, name) for name in ARRAYS + tuple(NODE_DTYPES) + DERIVED_ARRAYS})
    meta = {**traces.meta.to_json(), "schema": TRACE_SCHEMA, "schema_version": TRACE_VERSION, "content_hash": content,
            "positions": traces.positions, "n_prompts": traces.n_prompts}
    (directory / "traces.json").write_text(json.dumps(meta, indent=1))
    traces.meta = TraceMeta.of(meta)
    return content


def record_again(directory: Path, meta: dict | None = None) -> str:
    """What to do about unusable traces: restore them, or record them again (with their meta's models)."""
    meta = meta if isinstance(meta, dict) else {}
    flags = "".join(f" --{key} {meta[key]}" for key in ("target", "draft", "prompts") if isinstance(meta.get(key), str))
    return (f"restore the folder, or record the traces again with `simspec calibrate --traces-only{flags} "
            f"--out {directory} --force`")


# name -> (integer or floating kind, number of dimensions)
ARRAY_SHAPES = {"prompt_offsets": ("i", 1), "tokens": ("i", 1), "token_offsets": ("i", 1), "prompt_lengths": ("i", 1),
                "context_length": ("i", 1), "path_rank": ("i", 3), "level_scores": ("f", 3),
                "best_child_logprobs": ("f", 3), "node_depth": ("i", 2), "node_parent": ("i", 2),
                "node_prob": ("f", 2), "node_token": ("i", 2)}


def _check_arrays(arrays: dict[str, np.ndarray], meta: TraceMeta, data_file: Path, fix: str) -> None:
    """The arrays fit together (kinds, dimensions, lengths): one error naming the array at fault otherwise."""
    def bad(name: str, why: str) -> SimspecError:
        return SimspecError(f"traces {data_file}: array '{name}' {why}: {fix}")

    for name, (kind, ndim) in ARRAY_SHAPES.items():
        array = arrays[name]
        if array.dtype.kind not in ((kind, "u") if kind == "i" else (kind,)) or array.ndim != ndim:
            raise bad(name, f"must be a {ndim}-D {'integer' if kind == 'i' else 'float'} array "
                            f"(found {array.ndim}-D {array.dtype})")
    positions, n, levels = len(arrays["context_length"]), len(arrays["prompt_lengths"]), arrays["path_rank"].shape[1]
    width = meta.width
    expected = {"prompt_offsets": (n + 1,), "token_offsets": (n + 1,), "path_rank": (positions, levels, levels),
                "level_scores": (positions, levels, width * width), "best_child_logprobs": (positions, levels, width)}
    k = arrays["node_depth"].shape[1]
    expected.update({name: (positions, k) for name in NODE_DTYPES})
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            raise bad(name, f"has shape {arrays[name].shape}, not {shape}")
    if meta.temperature > 0:
        if k == 0:
            raise bad("node_prob", "is empty, but traces recorded at temperature > 0 need the node probabilities")
        parent, prob = arrays["node_parent"], arrays["node_prob"]
        if np.any(parent >= np.arange(k)[None, :]) or not np.all((prob >= 0) & (prob <= 1)):
            raise bad("node_parent' or 'node_prob", "is not a tree in engine order with probabilities in [0, 1]")
    for name, end in (("prompt_offsets", positions), ("token_offsets", len(arrays["tokens"]))):
        offsets = arrays[name]
        if offsets[0] != 0 or offsets[-1] != end or np.any(np.diff(offsets) < 0):
            raise bad(name, f"must rise from 0 to {end}")
    for key in ("splits", "prompt_ids"):
        if getattr(meta, key) is not None and len(getattr(meta, key)) != n:
            raise SimspecError(f"{data_file.with_suffix('.json')}: field '{key}' must be a list of {n} entries, one "
                               f"per prompt: {fix}")


_READ: dict[tuple, TraceSet] = {}  # the last folders read whole and verified, by their files' identity
_KEEP = 2


def load_traces(directory: Path, verify_hash: bool = True) -> TraceSet:
    """A trace folder (a relative one not here: the shipped copy); one clear error for anything
    unusable. A folder verified a moment ago and unchanged since is not read again: its arrays are
    read-only, so that one caller cannot change what the next one gets."""
    directory = locate(directory)
    key = _identity(Path(directory))
    if key is not None and key in _READ:
        return replace(_READ[key])  # its own object (a caller may set its meta), the same arrays
    traces = _read_traces(Path(directory), verify_hash)
    if key is not None and verify_hash:
        for value in vars(traces).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        _READ[key] = traces
        while len(_READ) > _KEEP:
            del _READ[next(iter(_READ))]
        return replace(traces)
    return traces


def _identity(directory: Path) -> tuple | None:
    try:
        stats = [(directory / name).stat() for name in ("traces.json", "traces.npz")]
    except OSError:
        return None
    return (str(directory.resolve()), *((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats))


def _read_traces(directory: Path, verify_hash: bool) -> TraceSet:
    meta_file, data_file = Path(directory) / "traces.json", Path(directory) / "traces.npz"
    blob = read_json(meta_file, "traces ", f"no traces at {directory} (missing traces.json): record them with "
                     f"`simspec calibrate --traces-only --out {directory}`", record_again(directory))
    fix = record_again(directory, blob)
    meta = StoredTraceMeta.check(blob, meta_file, fix)
    if meta.temperature < 0 or (meta.temperature > 0 and meta.nodes is None):
        raise SimspecError(f"{meta_file}: fields 'temperature' (>= 0) and 'nodes' (an integer, at T > 0) "
                           f"do not describe sampled traces: {fix}")
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
                for name in NODE_DTYPES:  # version 1 (greedy) has none
                    arrays[name] = blob[name] if name in blob.files else None
                prompt_tokens = blob["prompt_tokens"] if "prompt_tokens" in blob.files else None
                child_rank = blob["child_rank"] if "child_rank" in blob.files else None
    except FileNotFoundError:
        raise SimspecError(f"traces {data_file} are missing: {fix}") from None
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as exc:
        detail = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ""
        raise SimspecError(f"traces {data_file} are missing or corrupt ({exc.__class__.__name__}"
                           f"{': ' + detail if detail else ''}): {fix}") from None
    if any(arrays[name] is None for name in NODE_DTYPES):
        if meta.temperature > 0:
            raise SimspecError(f"traces {data_file} are missing or corrupt (no node arrays at temperature > 0): {fix}")
        arrays.update({name: np.zeros((len(arrays["context_length"]), 0), t) for name, t in NODE_DTYPES.items()})
    _check_arrays(arrays, meta, data_file, fix)
    if prompt_tokens is not None and len(prompt_tokens) and (
            prompt_tokens.dtype.kind not in "iu" or prompt_tokens.shape != (int(arrays["prompt_lengths"].sum()),)):
        raise SimspecError(f"traces {data_file}: array 'prompt_tokens' must hold the prompts' "
                           f"{int(arrays['prompt_lengths'].sum())} token ids: {fix}")
    levels = arrays["path_rank"].shape[1]
    if child_rank is not None and child_rank.size and (
            child_rank.dtype.kind != "i" or child_rank.shape != (len(arrays["context_length"]), levels)):
        raise SimspecError(f"traces {data_file}: array 'child_rank' must be [positions, {levels}] integers: {fix}")
    traces = TraceSet(**arrays, meta=meta, prompt_tokens=prompt_tokens,
                      child_rank=child_rank if child_rank is not None and child_rank.size else None)
    if verify_hash and traces.content_hash() != meta.content_hash:
        raise SimspecError(f"traces in {directory} do not match their recorded hash: the files were altered; {fix}")
    return traces
