"""A drafter's provenance: what ``train-draft`` records beside the weights, read back by the
model card (``drafter-card``) and by a run that continues the head (``--init``).

Where it lives depends on the kind: ``simspec.json`` beside an EAGLE-3 head (format
``simspec-drafter-card``; its ``config.json`` is the public layout servers read) and beside a
draft LM (``simspec-draft-lm``; its ``config.json`` is Hugging Face's), and the ``config.json``
of simspec's own EAGLE-style head (``simspec-eagle-drafter``, its architecture under ``config``).
A folder with neither (a public EAGLE checkpoint, a Hugging Face model) has no provenance: an
empty record. Every field is optional, as drafters trained before it lack some; a field of the
wrong type is one error line naming the file and the field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simspec.engine.formats import DRAFT_VOCAB_FILE, PROVENANCE_FILE, SIMSPEC_EAGLE
from simspec.errors import read_json
from simspec.schema import Record

EAGLE3_FORMAT = "simspec-drafter-card"  # simspec.json beside an EAGLE-3 head
DRAFT_LM_FORMAT = "simspec-draft-lm"  # simspec.json beside a draft LM
FORMAT_VERSION = 1
KIND_OF_FORMAT = {EAGLE3_FORMAT: "eagle3", DRAFT_LM_FORMAT: "lm", SIMSPEC_EAGLE: "eagle"}


@dataclass(frozen=True, kw_only=True)
class Agreement(Record):
    """``heldout_agreement``: top-1 / top-10 agreement with the target's greedy token on the
    held-out corpus (an EAGLE-3 head's top-1 at each unrolled step too)."""

    top1: float
    top10: float
    positions: int
    top1_by_step: dict | None = None


@dataclass(frozen=True, kw_only=True)
class InitAgreement(Record):
    """``init_agreement``: a continued head's (``--init``) starting weights, scored in the same run,
    before training, on the same held-out (and validation) corpus as the trained head: what the
    run added, measured alike. Scored as the run grew them (``--draft-vocab``,
    ``--intermediate-size``): a widened MLP computes what it did, added vocabulary rows may win
    argmaxes."""

    heldout: Agreement
    validation: Agreement | None = None


@dataclass(frozen=True, kw_only=True)
class CorpusSummary(Record):
    """``data``: the training corpus's metadata (its spec, target and the like in ``raw``)."""

    sources: dict | None = None  # per source: sequences and tokens
    spec: dict | None = None  # the CorpusSpec it was built from


@dataclass(frozen=True, kw_only=True)
class DraftShape(Record):
    """``config``: the drafter's architecture (an EAGLE-style head's whole ``EagleConfig``,
    a draft LM's reduced vocabulary alone)."""

    draft_vocab: int | None = None


@dataclass(frozen=True, kw_only=True)
class DrafterProvenance(Record):
    """What made a drafter: its target, corpus, training settings, timings and machine, and its
    held-out agreement."""

    format: Literal["simspec-drafter-card", "simspec-draft-lm", "simspec-eagle-drafter"] | None = None
    format_version: Literal[1] | None = None
    kind: Literal["eagle3", "eagle", "lm"] | None = None
    target: str | None = None
    simspec_version: str | None = None
    train_config: dict | None = None
    steps: int | None = None
    data: CorpusSummary | None = None
    heldout_agreement: Agreement | None = None
    validation_agreement: Agreement | None = None  # train-draft --validation: on the train prompts held apart
    draft_vocab_coverage: float | None = None  # share of the target's greedy tokens in the draft vocabulary
    data_seconds: float | None = None
    train_seconds: float | None = None
    machine: str | None = None
    config: DraftShape | None = None
    init: dict | None = None  # a continued head: the card of the run it started from
    init_agreement: InitAgreement | None = None  # a continued head: its start, scored before training
    parameters: int | None = None  # never stored: the model card counts them

    @property
    def sources(self) -> dict | None:
        """The training corpus's sequences and tokens per source."""
        return None if self.data is None else self.data.sources

    @property
    def part(self) -> str | None:
        """``K/N`` for a head trained on a part of its text (``train-draft --part``)."""
        part = None if self.data is None or self.data.spec is None else self.data.spec.get("part")
        return None if not part else "/".join(map(str, part))

    @property
    def draft_vocab(self) -> int | None:
        return None if self.config is None else self.config.draft_vocab


def retrain_advice(directory: Path, blob: dict | None = None) -> str:
    """How to make the drafter in ``directory`` again (its kind as its provenance says, else as
    its files suggest)."""
    blob = blob if isinstance(blob, dict) else {}
    kind, fmt = blob.get("kind"), blob.get("format")
    if kind not in KIND_OF_FORMAT.values():
        kind = KIND_OF_FORMAT.get(fmt) if isinstance(fmt, str) else None
    if kind is None:
        kind = ("eagle" if not (directory / PROVENANCE_FILE).is_file() else
                "lm" if (directory / DRAFT_VOCAB_FILE).is_file() else "eagle3")
    return f"restore it, or train the drafter again with `simspec train-draft --kind {kind} --out {directory} --force`"


def read_provenance(directory: Path) -> DrafterProvenance:
    """The provenance simspec wrote beside the drafter in ``directory``: ``simspec.json``, else
    the ``config.json`` of a simspec EAGLE-style head; an empty record for a ``config.json``
    simspec did not write. One ``SimspecError`` line when it is unreadable or a field has the
    wrong type; a folder with neither file is one too."""
    directory = Path(directory)
    source = directory / PROVENANCE_FILE
    if not source.is_file():
        source = directory / "config.json"
    missing = (f"{directory} is not a drafter folder (no {PROVENANCE_FILE} or config.json): give the folder "
               "of a drafter simspec trained, or a shipped drafter's name")
    blob = read_json(source, "drafter ", missing, retrain_advice(directory))
    if source.name == "config.json" and blob.get("format") != SIMSPEC_EAGLE:
        return DrafterProvenance.of({})  # Hugging Face's or a public EAGLE checkpoint's: not simspec's
    return DrafterProvenance.parse(blob, source, retrain_advice(directory, blob))


def checked(card: dict) -> dict:
    """``card`` as a trainer writes it, refused (a bug) unless it reads back."""
    return DrafterProvenance.of(card).to_json()
