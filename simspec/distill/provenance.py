"""A drafter's provenance: what ``train-draft`` records beside the weights, read back by the
model card (``drafter-card``) and by a run that continues the head (``--init``).

It is ``simspec.json`` beside an EAGLE-3 head or a draft LM, the ``config.json`` of simspec's
own EAGLE-style head; other folders have an empty record. Every field is optional (older
drafters lack some); a field of the wrong type is one error line naming the file and field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simspec.engine.formats import PROVENANCE_FILE, SIMSPEC_EAGLE, retrain_advice
from simspec.errors import SimspecError, read_json
from simspec.schema import Record

FORMAT_VERSION = 1


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
    """``init_agreement``: a continued head's (``--init``) starting weights as the run grew them,
    scored before training on the trained head's held-out (and validation) corpus."""

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


def read_provenance(directory: Path) -> DrafterProvenance:
    """The provenance beside the drafter in ``directory`` (module docstring), or one error line."""
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


def check_init_fits(where: str, vocab: int, draft_vocab: int, units: int, intermediate: int | None) -> None:
    """A head continued (``--init``) keeps its ``vocab`` tokens and ``units`` MLP units: refuse a
    smaller ``--draft-vocab`` or ``--intermediate-size``."""
    if vocab > draft_vocab:
        raise SimspecError(f"{where} has a draft vocabulary of {vocab} tokens, --draft-vocab is {draft_vocab}: a "
                           f"continued head keeps its tokens; pass --draft-vocab {vocab} or more")
    if intermediate is not None and units > intermediate:
        raise SimspecError(f"{where} has an MLP of {units} units, --intermediate-size is {intermediate}: a "
                           f"continued head keeps its units; pass {units} or more")


def checked(card: dict) -> dict:
    """``card`` as a trainer writes it, refused (a bug) unless it reads back."""
    return DrafterProvenance.of(card).to_json()
