"""The teacher corpus's prompt pools (``simspec.distill.sources``): later ShareGPT turns with the
conversation so far, stubs from installed packages, each on the train side of the split."""

from __future__ import annotations

import itertools
import random

from simspec.data import split_of
from simspec.distill.sources import _dialogue, package_stubs, sharegpt_later_turns


def test_a_dialogue_alternates_from_a_human_turn_and_stops_where_it_breaks():
    turn = lambda who, text: {"from": who, "value": text}  # noqa: E731
    record = {"conversations": [turn("human", "a"), turn("gpt", "b"), turn("human", "c"), turn("human", "d"),
                                turn("gpt", "e")]}
    assert _dialogue(record) == [("user", "a"), ("assistant", "b"), ("user", "c")]
    assert _dialogue({"conversations": [turn("gpt", "x"), turn("human", "y")]}) is None
    assert _dialogue({"conversations": [turn("human", "a"), turn("gpt", " ")]}) is None


def test_later_turns_end_in_a_user_turn_of_a_train_conversation():
    prompts = sharegpt_later_turns("train", max_turns=3)
    assert len(prompts) > 100
    for messages in prompts:
        assert split_of(messages[0]["content"]) == "train"  # the conversation's split, as the prompt sets'
        assert len(messages) in (3, 5) and messages[-1]["role"] == "user"
        assert [m["role"] for m in messages[:2]] == ["user", "assistant"]
    held = sharegpt_later_turns("heldout", max_turns=3)
    assert not {m[0]["content"] for m in held} & {m[0]["content"] for m in prompts}


def test_package_stubs_are_documented_functions_read_lazily_in_a_seeded_order(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "site-packages"
    for k in range(6):
        (site / f"pkg{k}").mkdir(parents=True)
        doc = "then scale the sum by y and return the product."
        body = "\n".join(f'def f{k}_{j}(x, y):\n    """Add {k} and {j} to x, {doc}"""\n'
                         f"    return (x + {k + j}) * y\n" for j in range(3))
        (site / f"pkg{k}" / "mod.py").write_text(body + "\ndef bare(x):\n    return x\n")
    (site / "broken.py").write_text("def (:\n")
    monkeypatch.setattr("sys.path", [str(site)])
    first = list(package_stubs(random.Random(0)))
    assert len(first) == 18 and all(s.startswith("def f") and '"""' in s for s in first)  # no bare, no broken
    assert list(itertools.islice(package_stubs(random.Random(0)), 5)) == first[:5]
    assert first != list(package_stubs(random.Random(1)))  # another seed, another file order
