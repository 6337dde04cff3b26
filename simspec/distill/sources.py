"""Teacher text sources: the prompts and texts ``simspec.distill.corpus`` builds a corpus from.

Human text (``sharegpt``: first exchanges; ``code``: standard-library source in chunks) goes to
the teacher pass as it is; every ``self*`` source is a pool of chat prompts the target continues:
``self`` (ShareGPT first turns and HumanEval prompts), ``selfturns`` (later human turns, the
conversation so far), ``selfcode`` (stdlib function stubs: signature + docstring), ``selfpkg``
(the same from installed packages), ``selft1`` (``self`` sampled at T = 1).

Never a held-out prompt: conversations are split by their first question's hash, as the prompt
sets are, stubs by their own text's. ``--validation`` splits the train side into ``fit`` and
``validation`` (``in_split``); ``--part K/N`` keeps the K-th of N disjoint parts of every source.
The newer pools are deduplicated by token ids (``self`` and ``selfcode`` stay as the shipped
head's corpus was built).
"""

from __future__ import annotations

import ast
import functools
import random
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simspec.data import in_part, in_validation, load_prompts, render_chat, render_messages, sharegpt_records, split_of

SELF_SOURCES = ("self", "selfturns", "selfcode", "selfpkg", "selft1")
SAMPLED = {"selft1": 1.0}  # sources continued by sampling, at this temperature; the rest greedily
# train (all of it), heldout, and the train side cut in two: fit + validation (``in_validation``)
CORPUS_SPLITS = ("train", "heldout", "fit", "validation")


Part = tuple[int, int] | None  # (k, n): the k-th of n parts (1-based), or None: the whole split


def in_split(text: str, split: str, part: Part = None) -> bool:
    """Whether ``text`` (a first question, a prompt, a stub) belongs to ``split`` (and ``part``)."""
    if part is not None and not in_part(text, part):
        return False
    if split in ("train", "heldout"):
        return split_of(text) == split
    return split_of(text) == "train" and in_validation(text) == (split == "validation")


def _first_exchange(record: Any) -> tuple[str, str] | None:
    """(first human message, the answer right after it), or None."""
    turns = record.get("conversations") if isinstance(record, dict) else None
    for first, second in zip(turns or (), (turns or ())[1:]):
        if isinstance(first, dict) and isinstance(second, dict) and first.get("from") == "human":
            question, answer = first.get("value"), second.get("value")
            if second.get("from") == "gpt" and isinstance(question, str) and isinstance(answer, str):
                return (question, answer) if question.strip() and answer.strip() else None
            return None
    return None


def sharegpt_conversations(split: str, part: Part = None) -> list[tuple[str, str]]:
    """(question, answer) pairs of ShareGPT conversations in ``split``, in dataset order."""
    return [(q, a) for q, a in _parsed(_first_exchange) if in_split(q, split, part)]


@functools.cache
def _parsed(parse) -> tuple:
    return tuple(sharegpt_records(parse))  # parsed once per process: every split and part reads it


def _dialogue(record: Any) -> list[tuple[str, str]] | None:
    """(role, text) turns alternating from a human turn, cut where that breaks; None under one exchange."""
    out: list[tuple[str, str]] = []
    for turn in (record.get("conversations") if isinstance(record, dict) else None) or ():
        role, want = ("user", "human") if len(out) % 2 == 0 else ("assistant", "gpt")
        value = turn.get("value") if isinstance(turn, dict) else None
        if not isinstance(value, str) or turn.get("from") != want or not value.strip():
            break
        out.append((role, value))
    return out if len(out) >= 2 else None


def sharegpt_later_turns(split: str, max_turns: int = 4, part: Part = None) -> list[list[dict]]:
    """Every conversation of ``split`` up to its human turn k, k = 2..``max_turns``, answers between."""
    out = []
    for turns in _parsed(_dialogue):
        if not in_split(turns[0][1], split, part):
            continue
        for k in range(2, max_turns + 1):
            if len(turns) < 2 * k - 1:
                break
            out.append([{"role": role, "content": text} for role, text in turns[: 2 * k - 1]])
    return out


def sharegpt_texts(tokenizer, n_tokens: int, seq_len: int, rng: random.Random, split: str, part: Part = None
                   ) -> list[list[int]]:
    out, total = [], 0
    conversations = sharegpt_conversations(split, part)
    rng.shuffle(conversations)
    for question, answer in conversations:
        messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        ids = tokenizer.apply_chat_template(messages, tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        ids = list(ids)[:seq_len]
        if len(ids) < 32:
            continue
        out.append(ids)
        total += len(ids)
        if total >= n_tokens:
            break
    return out


def code_texts(tokenizer, n_tokens: int, seq_len: int, rng: random.Random, part: Part = None) -> list[list[int]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if part is None or in_part(p.name, part))  # top level: stable
    rng.shuffle(files)
    out, total = [], 0
    for path in files:
        try:
            ids = tokenizer.encode(path.read_text(encoding="utf-8"), add_special_tokens=False)
        except (OSError, UnicodeDecodeError):
            continue
        for start in range(0, max(0, len(ids) - 32), seq_len):
            out.append(ids[start:start + seq_len])
            total += len(out[-1])
            if total >= n_tokens:
                return out
    return out


def _stubs_of(paths: Iterator[Path]) -> list[str]:
    """Function stubs (signature + docstring) of documented functions with a body, 80-1200 chars."""
    stubs = []
    for path in paths:
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            continue
        lines = source.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) and len(node.body) > 1:
                doc = node.body[0]
                stub = "\n".join(lines[node.lineno - 1:doc.end_lineno])
                if 80 <= len(stub) <= 1200:
                    stubs.append(stub.strip("\n") + "\n")
    return stubs


def stdlib_stubs(rng: random.Random) -> list[str]:
    """HumanEval-shaped code prompts from the Python standard library's top-level modules."""
    stubs = _stubs_of(sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")))
    rng.shuffle(stubs)
    return stubs


def package_stubs(rng: random.Random) -> Iterator[str]:
    """The same from site-packages, file by file in a seeded order, read only as far as taken."""
    roots = sorted({Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()})
    files = [path for root in roots for path in sorted(root.rglob("*.py"))]
    rng.shuffle(files)
    for path in files:
        yield from _stubs_of(iter([path]))


def self_prompts(tokenizer, source: str, n_tokens: int, seq_len: int, new_tokens: int, split: str,
                 rng: random.Random, part: Part = None) -> list[list[int]]:
    """Chat-rendered prompts of ``source``'s pool whose prompt + continuation add up to ``n_tokens``;
    prompts leaving no room for the continuation are skipped, not cut."""
    if source in ("self", "selft1"):
        chat = [p for p in load_prompts("sharegpt", max_chars=1500) if in_split(p.text, split, part)]
        code = [p for p in load_prompts("humaneval") if in_split(p.text, split, part)]
        rng.shuffle(chat)
        rng.shuffle(code)
        rendered = (render_chat(tokenizer, p.text) for p in code[: len(chat) // 8] + chat)
    elif source == "selfturns":
        turns = sharegpt_later_turns(split, part=part)
        rng.shuffle(turns)
        rendered = (render_messages(tokenizer, messages) for messages in turns)
    else:
        stubs = stdlib_stubs(rng) if source == "selfcode" else package_stubs(rng)
        rendered = (render_chat(tokenizer, t) for t in stubs if in_split(t, split, part))
    distinct = source not in ("self", "selfcode")  # the shipped head's pools stay as they were built
    out, seen, total = [], set(), 0
    for ids in rendered:
        if len(ids) > seq_len - new_tokens or (distinct and tuple(ids) in seen):
            continue
        seen.add(tuple(ids))
        out.append(ids)
        total += len(ids) + new_tokens
        if total >= n_tokens:
            break
    return out
