"""The drafter's provenance (``simspec.json``, or a simspec EAGLE-style head's ``config.json``) read
into ``DrafterProvenance``, and the model card written from it: every drafter in the tree reads,
a field of the wrong type is one line naming the file and the field, and the card renders the
shipped head's provenance as it did."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from simspec.distill.provenance import DrafterProvenance, checked, read_provenance
from simspec.engine.formats import SIMSPEC_EAGLE
from simspec.errors import SimspecError

ROOT = Path(__file__).resolve().parents[1]
DRAFTERS = ROOT / "real" / "drafters"
RESEARCH_HEADS = ROOT / "research" / "runs" / "bench" / "research-heads"
CARDS = [DRAFTERS / "eagle", DRAFTERS / "lm", *sorted(RESEARCH_HEADS.iterdir())]


@pytest.mark.parametrize("folder", CARDS, ids=lambda f: f.name)
def test_every_drafter_card_in_the_tree_reads(folder):
    card = read_provenance(folder)
    blob = json.loads((folder / "simspec.json").read_text())
    assert card.kind == blob["kind"] and card.target == "smollm2-135m-instruct" and card.steps == blob["steps"]
    assert card.heldout_agreement.top1 == blob["heldout_agreement"]["top1"] > 0
    assert card.sources == blob["data"]["sources"] and card.to_json() == blob


def lm_card(tmp_path: Path, **changes) -> Path:
    folder = tmp_path / "drafter"
    folder.mkdir()
    blob = {**json.loads((DRAFTERS / "lm" / "simspec.json").read_text()), **changes}
    (folder / "simspec.json").write_text(json.dumps(blob))
    return folder


ADVICE = "restore it, or train the drafter again with `simspec train-draft --kind lm --out {folder} --force`"


@pytest.mark.parametrize(("changes", "problem"), [
    ({"steps": "many"}, "field 'steps' must be an integer (found the string 'many')"),
    ({"train_seconds": True}, "field 'train_seconds' must be a number (found true)"),
    ({"heldout_agreement": {"top1": "high", "top10": 0.6, "positions": 9}},
     "field 'heldout_agreement.top1' must be a number (found the string 'high')"),
    ({"data": {"sources": [1, 2]}}, "field 'data.sources' must be an object (found a list of 2)"),
    ({"config": {"draft_vocab": 81.5}}, "field 'config.draft_vocab' must be an integer (found the number 81.5)"),
    ({"kind": "medusa"}, "field 'kind' must be eagle3, eagle or lm (found 'medusa')"),
])
def test_a_wrong_typed_provenance_field_is_one_line(tmp_path, changes, problem):
    folder = lm_card(tmp_path, **changes)
    with pytest.raises(SimspecError) as error:
        read_provenance(folder)
    assert str(error.value) == f"{folder / 'simspec.json'}: {problem}: {ADVICE.format(folder=folder)}"


def test_unreadable_or_absent_provenance_is_one_line(tmp_path):
    folder = lm_card(tmp_path)
    (folder / "simspec.json").write_text("{not json")
    with pytest.raises(SimspecError, match=r"simspec\.json is unreadable \(JSONDecodeError\): restore it"):
        read_provenance(folder)
    (folder / "simspec.json").unlink()
    with pytest.raises(SimspecError, match="is not a drafter folder"):
        read_provenance(folder)


def test_only_simspecs_own_config_json_is_provenance(tmp_path):
    """A Hugging Face or public EAGLE config.json is theirs (no provenance: an empty record); the
    config.json of simspec's EAGLE-style head carries its provenance and is checked."""
    folder = tmp_path / "drafter"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "steps": "n/a"}))
    assert read_provenance(folder) == DrafterProvenance.of({})
    (folder / "config.json").write_text(json.dumps({"format": SIMSPEC_EAGLE, "format_version": 1, "kind": "eagle",
                                                    "config": {"draft_vocab": 4096}, "steps": 12}))
    card = read_provenance(folder)
    assert (card.kind, card.draft_vocab, card.steps) == ("eagle", 4096, 12)
    (folder / "config.json").write_text(json.dumps({"format": SIMSPEC_EAGLE, "format_version": 1, "steps": "n/a"}))
    with pytest.raises(SimspecError, match=r"config\.json: field 'steps' must be an integer .*--kind eagle "):
        read_provenance(folder)


def test_a_trainer_writes_only_what_reads_back():
    with pytest.raises(SimspecError, match="this is a bug in simspec"):
        checked({"steps": 1.5})
    assert checked({"steps": 3}) == {"steps": 3}


def test_the_card_renders_the_shipped_heads_provenance_as_shipped(tmp_path):
    """The shipped head's README.md, written again from its simspec.json and measured.json (its
    parameter count as the README says), but for the title and description."""
    from simspec.distill.card import write_card

    shipped = (DRAFTERS / "eagle" / "README.md").read_text()
    parameters = int(re.search(r"trainable parameters: ([\d,]+)", shipped).group(1).replace(",", ""))
    card = read_provenance(DRAFTERS / "eagle")
    card = card.with_(parameters=parameters, config={"draft_vocab": 8192})
    write_card(tmp_path, "title", "description", card, json.loads((DRAFTERS / "eagle" / "measured.json").read_text()))
    written, expected = (tmp_path / "README.md").read_text().splitlines(), shipped.splitlines()
    assert len(written) == len(expected)
    assert [line for i, line in enumerate(written) if i not in (0, 2)] == \
        [line for i, line in enumerate(expected) if i not in (0, 2)]
    assert (tmp_path / "measured.json").read_text() == (DRAFTERS / "eagle" / "measured.json").read_text()


def test_a_continued_head_keeps_the_earlier_card(tmp_path):
    from simspec.distill.run import initial_provenance

    folder = tmp_path / "head"
    shutil.copytree(DRAFTERS / "eagle", folder, ignore=shutil.ignore_patterns("*.safetensors"))
    blob = json.loads((folder / "simspec.json").read_text())
    init = initial_provenance(folder)
    assert init == {"path": str(folder), "weights_sha256": None,
                    **{k: blob[k] for k in ("train_config", "steps", "heldout_agreement", "train_seconds",
                                            "data_seconds", "init")},
                    "data_sources": blob["data"]["sources"]}


def test_a_card_shows_the_validation_agreement_its_settings_were_chosen_on(tmp_path):
    """train-draft --validation: the card says what the head scored on the train prompts held apart."""
    from simspec.distill.card import write_card

    card = read_provenance(DRAFTERS / "eagle").with_(
        parameters=1, config={"draft_vocab": 8192}, validation_agreement={"top1": 0.5, "top10": 0.8, "positions": 9})
    write_card(tmp_path, "title", "description", card, json.loads((DRAFTERS / "eagle" / "measured.json").read_text()))
    said = (tmp_path / "README.md").read_text()
    assert "on its validation corpus (train prompts held apart" in said and "top-1 0.500, top-10 0.800 over 9" in said
    write_card(tmp_path, "title", "description", card.with_(validation_agreement=None),
               json.loads((DRAFTERS / "eagle" / "measured.json").read_text()))
    assert "validation corpus" not in (tmp_path / "README.md").read_text()


def test_a_continued_heads_card_says_what_its_start_scored_on_the_same_corpora(tmp_path):
    from simspec.distill.card import write_card

    start = {"heldout": {"top1": 0.25, "top10": 0.5, "positions": 9},
             "validation": {"top1": 0.125, "top10": 0.5, "positions": 9}}
    card = read_provenance(DRAFTERS / "eagle").with_(parameters=1, config={"draft_vocab": 8192},
                                                     init_agreement=start)
    measured = json.loads((DRAFTERS / "eagle" / "measured.json").read_text())
    write_card(tmp_path, "title", "description", card, measured)
    said = (tmp_path / "README.md").read_text()
    assert ("The head it continued (`--init`), scored in the same run before training: top-1 0.250 on that "
            "held-out corpus, 0.125 on the validation corpus.") in said
    write_card(tmp_path, "title", "description", card.with_(init_agreement=None), measured)
    assert "scored in the same run before training" not in (tmp_path / "README.md").read_text()


def test_a_card_says_which_part_of_its_text_a_head_was_trained_on(tmp_path):
    from simspec.distill.card import write_card

    card = read_provenance(DRAFTERS / "eagle").with_(parameters=1, config={"draft_vocab": 8192})
    measured = json.loads((DRAFTERS / "eagle" / "measured.json").read_text())
    assert card.part is None
    write_card(tmp_path, "title", "description", card, measured)
    assert "(`--part`)" not in (tmp_path / "README.md").read_text()
    data = {**card.data.raw, "spec": {**card.data.raw.get("spec", {}), "part": [2, 4]}}
    write_card(tmp_path, "title", "description", card.with_(data=data), measured)
    assert "; part 2/4 of that text (`--part`)" in (tmp_path / "README.md").read_text()
