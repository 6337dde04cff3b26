"""``simspec train-draft``: builds the teacher corpus, trains a drafter on it resumably (from
``OUT.partial/``) and deterministically, and scores it on held-out text."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt

if TYPE_CHECKING:
    from simspec.distill.corpus import CorpusSpec

Bar = Callable[[str, int], Callable[..., None]]
KINDS = ("eagle3", "eagle", "lm")
VALIDATION_TOKENS = 200_000  # more than the validation slice of the self pool holds: all of it


@dataclass(frozen=True, kw_only=True)
class TrainDraftRequest:
    kind: str = opt("eagle3", "eagle3: an EAGLE-3 head in the public layout SGLang and vLLM load (three fused target "
                    "layers, its own LM head, training-time test); eagle: simspec's EAGLE-1-style head; lm: a small "
                    "standalone Llama sharing the target's tokenizer.")
    target: str = flags.target()
    data: tuple[str, ...] = opt(("self:0.55", "selfcode:0.15", "sharegpt:0.15", "code:0.15"), "Teacher text, "
                                "NAME[:SHARE] comma-separated: self (the target's greedy continuations of train-split "
                                "ShareGPT and HumanEval prompts), selfturns (of later ShareGPT turns, the "
                                "conversation so far), selfcode (of stdlib function stubs), selfpkg (of function "
                                "stubs from installed packages), selft1 (the self prompts sampled at T = 1), "
                                "sharegpt (train-split conversations), code (Python stdlib source). No shares: even "
                                "split.", parse=flags.names)
    tokens: int = opt(480_000, "Teacher tokens in total.", min=256)
    epochs: int = opt(4, "Passes over the teacher corpus.", min=1)
    draft_vocab: int = opt(8192, "Reduced draft vocabulary (most frequent target tokens).", min=16)
    unroll: int = opt(2, "eagle: training passes feeding the head's own features back (1 = EAGLE-1).", min=1, max=4)
    ttt_steps: int = opt(4, "eagle3: training-time test steps (the head unrolled on its own outputs; step k's loss "
                         "weighs 0.8^k).", min=1, max=8)
    feature_weight: float = opt(1.0, "eagle: weight of the feature-regression loss (0 = token loss only).", min=0.0)
    hidden: int = opt(256, "lm: hidden size.", min=16)
    layers: int = opt(2, "lm: decoder layers.", min=1)
    lr: float = opt(1e-3, "Peak learning rate (AdamW, warm-up then cosine).")
    seed: int = flags.seed()
    labels: str = opt("soft", "eagle3: soft (cross-entropy against the target's distribution over the draft "
                      "vocabulary, EAGLE's loss) or hard (against its greedy token).")
    init: str | None = opt(None, "eagle3: continue training this head (its weights and draft vocabulary) on the "
                           "corpus; its card is kept as provenance. A --draft-vocab above the head's grows its "
                           "vocabulary by the corpus's most frequent other tokens, their rows starting as the "
                           "target's.")
    intermediate: int | None = opt(None, "eagle3: the head's MLP width (default the target's). With --init, a "
                                   "larger one widens the head: its units kept, the new ones starting with no "
                                   "effect.", flag="--intermediate-size", min=16)
    cut_at_eos: bool = opt(True, "End self-distilled text at its first end-of-sequence token, where decoding stops "
                           "(--no-cut-at-eos: the corpus of heads trained before the cut, e.g. the shipped head's "
                           "first stage).", flag="--cut-at-eos/--no-cut-at-eos")
    validation: bool = opt(False, "Hold 1/16 of the train prompts apart (a hash of each prompt: the same on every "
                           "machine) and score the drafter on the target's text for them too, as "
                           "validation_top1: settings are chosen on it, not on the held-out prompts the card "
                           "scores. Training then uses the other 15/16.", flag="--validation/--no-validation")
    part: str | None = opt(None, "Train on the K-th of N disjoint parts of the teacher text (K/N, e.g. 2/4: every "
                           "prompt, conversation and stub assigned by a hash of its text, the same on every "
                           "machine); --tokens is the part's. A corpus larger than one session's teacher pass "
                           "and training is trained part by part, each run continuing the last with --init. "
                           "Held-out and validation text stay whole.")
    text_store: str | None = opt(None, "Folder of the target's self-distilled text, kept per prompt: what it holds "
                                 "is used as stored, what is missing is generated into it, and it is never "
                                 "deleted, so the text accumulates across runs, budgets and machines (commit it, or "
                                 "fill it on a GPU machine and carry it back). Default: OUT.partial/text, removed "
                                 "with the run's work folder.")
    generation_batch: int | None = opt(None, "Prompts the target continues at once when it generates its own "
                                       "text (batched greedy decoding; larger is faster per token until the "
                                       "machine's matmuls saturate). Default: the corpus's GENERATION_BATCH, 128.",
                                       min=1)
    text_only: bool = opt(False, "Only generate the corpora's self-distilled text into --text-store, then stop: no "
                          "teacher pass, no training, no drafter.", flag="--text-only")
    dtype: str = flags.dtype()  # the target's (teacher's) dtype
    out: str | None = flags.out()
    force: bool = flags.force()

    def corpus_specs(self) -> tuple[CorpusSpec, CorpusSpec, CorpusSpec | None]:
        """The training corpus, the held-out one and, with ``--validation``, the validation one."""
        from simspec.distill.corpus import CorpusSpec

        names, shares = [], []
        for item in self.data:
            name, _, share = item.partition(":")
            names.append(name)
            try:
                shares.append(float(share) if share else None)
            except ValueError:
                raise SimspecError(f"--data {item!r}: a share must be a number (NAME:SHARE, e.g. self:0.5)") from None
        if any(s is None for s in shares) and not all(s is None for s in shares):
            raise SimspecError("--data: give a share to every source or to none (NAME:SHARE, shares summing to 1)")
        train = CorpusSpec(tuple(names), self.tokens, None if shares[0] is None else tuple(shares), seed=self.seed,
                           dtype=self.dtype, cut_at_eos=self.cut_at_eos, split="fit" if self.validation else "train",
                           part=self.corpus_part())
        heldout = CorpusSpec(("self",), max(4096, self.tokens // 20), seed=self.seed + 1, split="heldout",
                             dtype=self.dtype, cut_at_eos=self.cut_at_eos)
        # the whole slice (421 prompts of the self pool, 75 k tokens), whatever the budget: a fixed yardstick
        validation = CorpusSpec(("self",), VALIDATION_TOKENS, seed=self.seed + 2, split="validation",
                                dtype=self.dtype, cut_at_eos=self.cut_at_eos) if self.validation else None
        return train, heldout, validation

    def corpus_part(self) -> tuple[int, int] | None:
        """``--part K/N`` as (K, N)."""
        if self.part is None:
            return None
        k, _, n = self.part.partition("/")
        try:
            return int(k), int(n)
        except ValueError:
            raise SimspecError(f"--part takes K/N, the K-th of N parts (N >= 2, 1 <= K <= N), e.g. 2/4; got "
                               f"{self.part}") from None

    def eagle3_config(self):
        """The EAGLE-3 trainer's settings; bf16 matmuls only where the CPU has them (``native_bf16``)."""
        from simspec.distill.trainer import Eagle3TrainConfig
        from simspec.engine.models import native_bf16

        return Eagle3TrainConfig(draft_vocab=self.draft_vocab, epochs=self.epochs, lr=self.lr,
                                 ttt_steps=self.ttt_steps, seed=self.seed, soft_labels=self.labels == "soft",
                                 init=self.init, intermediate=self.intermediate, autocast_bf16=native_bf16())

    def out_dir(self) -> Path:
        return Path(self.out or f"real/drafters/{self.kind}")

    def check(self) -> None:
        """The flags and the output folder, before the target loads."""
        from simspec.cache import check_out
        from simspec.distill.provenance import check_init_fits, read_provenance
        from simspec.engine.models import resolve_dtype

        if self.kind not in KINDS:
            raise SimspecError(f"--kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.labels not in ("soft", "hard"):
            raise SimspecError(f"--labels must be soft or hard, got {self.labels!r}")
        if self.init is not None:
            if self.kind != "eagle3":
                raise SimspecError(f"--init continues an EAGLE-3 head: use it with --kind eagle3, not {self.kind}")
            config = Path(self.init) / "config.json"
            if not config.is_file():
                raise SimspecError(f"--init {self.init}: no EAGLE-3 head there (config.json missing): give the "
                                   "folder train-draft wrote")
            try:  # before the corpus (an hour of teacher pass): the rest is checked once the target loads
                fields = json.loads(config.read_text())
                own = int(fields.get("draft_vocab_size", 0))
                units = int(fields.get("intermediate_size", 0))
            except (OSError, ValueError, TypeError, AttributeError):
                own = units = 0
            check_init_fits(f"--init {self.init}", own, self.draft_vocab, units, self.intermediate)
            read_provenance(Path(self.init))  # its card goes into the new one's: refused now, not after training
        if self.intermediate is not None and self.kind != "eagle3":
            raise SimspecError(f"--intermediate-size sets an EAGLE-3 head's MLP: use it with --kind eagle3, "
                               f"not {self.kind}")
        resolve_dtype(self.dtype)
        self.corpus_specs()
        if self.text_only:
            if self.text_store is None:
                raise SimspecError("--text-only generates text into a folder you keep: give it with --text-store DIR")
            return  # writes no drafter: --out is not used
        check_out(self.out_dir(), self.force)


def initial_provenance(directory: Path) -> dict:
    """What a continued head started from: the earlier run's card (its own ``init`` included)."""
    import hashlib

    from simspec.distill.provenance import read_provenance

    card = read_provenance(directory)  # empty for a head simspec did not train
    weights = directory / "model.safetensors"
    earlier = {"train_config": card.train_config, "steps": card.steps,
               "heldout_agreement": None if card.heldout_agreement is None else card.heldout_agreement.to_json(),
               "train_seconds": card.train_seconds, "data_seconds": card.data_seconds, "init": card.init}
    return {"path": str(directory),
            "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else None,
            **{k: v for k, v in earlier.items() if v is not None}, "data_sources": card.sources}


def train_draft(request: TrainDraftRequest, bar: Bar, status: Callable[[str], object]) -> dict:
    """Runs the request; returns the summary (the ``--json`` line)."""
    import torch

    from simspec.cache import atomic_directory
    from simspec.distill.corpus import GENERATION_BATCH, build_corpus
    from simspec.distill.eagle3_trainer import Eagle3Trainer
    from simspec.distill.trainer import EagleTrainConfig, EagleTrainer, LMTrainConfig, LMTrainer
    from simspec.engine.draft_lm import DraftLMShape
    from simspec.engine.models import load_model
    from simspec.machine import machine

    r = request
    r.check()
    out_dir = r.out_dir()
    spec, heldout, validation = r.corpus_specs()
    torch.manual_seed(r.seed)
    with status(f"loading {r.target}"):
        loaded = load_model(r.target, dtype=r.dtype)
    # Everything a stopped run resumes from lives in OUT.partial/: the self-distilled text (hours of
    # generation; copy the folder to go on elsewhere) unless kept in --text-store, and the training checkpoint.
    partial = out_dir.with_name(out_dir.name + ".partial")
    store = Path(r.text_store) if r.text_store else partial / "text"
    batch = r.generation_batch or GENERATION_BATCH
    started = time.perf_counter()
    if r.text_only:
        return generate_text(loaded, tuple(s for s in (spec, heldout, validation) if s), store, bar, started, batch)
    corpus = build_corpus(loaded, spec, bar, text_store=store, batch=batch)
    heldout_corpus = build_corpus(loaded, heldout, bar, text_store=store, batch=batch)
    validation_corpus = (None if validation is None else
                         build_corpus(loaded, validation, bar, text_store=store, batch=batch))
    data_s = time.perf_counter() - started
    if r.kind == "eagle3":
        trainer = Eagle3Trainer(loaded, corpus, r.eagle3_config())
    elif r.kind == "eagle":
        trainer = EagleTrainer(loaded, corpus, EagleTrainConfig(
            draft_vocab=r.draft_vocab, epochs=r.epochs, lr=r.lr, unroll=r.unroll, feature_weight=r.feature_weight,
            seed=r.seed))
    else:
        shape = DraftLMShape(hidden=r.hidden, layers=r.layers, heads=max(1, r.hidden // 64),
                             kv_heads=max(1, r.hidden // 128), intermediate=int(r.hidden * 2.75) // 16 * 16)
        trainer = LMTrainer(loaded, corpus, LMTrainConfig(draft_vocab=r.draft_vocab, epochs=r.epochs, lr=r.lr,
                                                          seed=r.seed, shape=shape))
    start = None if r.init is None else init_agreement(trainer, heldout_corpus, validation_corpus, partial, status)
    advance, done = bar("training", trainer.total_steps), [0]

    def tick(stats: dict) -> None:  # a resumed run starts past step 0
        advance(stats["step"] - done[0], description=f"training loss {stats['loss']:.3f}")
        done[0] = stats["step"]

    trainer.train(partial / "checkpoint.pt", tick)
    train_s = trainer.seconds
    agreement = trainer.agreement(heldout_corpus)
    meta = {"kind": r.kind, "dtype": r.dtype, "data": corpus.meta, "heldout": heldout_corpus.meta, "seed": r.seed,
            "heldout_agreement": agreement, "data_seconds": data_s, "train_seconds": train_s,
            "machine": machine(str(loaded.device))}
    chosen_on = {}
    if validation_corpus is not None:
        meta["validation"] = validation_corpus.meta
        meta["validation_agreement"] = trainer.agreement(validation_corpus)
        chosen_on = {"validation_top1": meta["validation_agreement"]["top1"],
                     "validation_top10": meta["validation_agreement"]["top10"]}
    started_at = {}  # a continued head: where it started, on the same corpora
    if r.init is not None:
        meta["init"] = initial_provenance(Path(r.init))
        meta["init_agreement"] = start
        started_at = {f"init_{where}_top1": a["top1"] for where, a in start.items() if a is not None}
    with atomic_directory(out_dir, replace=r.force) as tmp:
        trainer.save(tmp, meta)
    shutil.rmtree(partial, ignore_errors=True)
    return {"drafter": str(out_dir), "kind": r.kind, "heldout_top1": agreement["top1"],
            "heldout_top10": agreement["top10"], **chosen_on, **started_at, "coverage": trainer.coverage(),
            "data_seconds": data_s, "train_seconds": train_s, "steps": trainer.step}


def init_agreement(trainer, heldout, validation, partial: Path, status) -> dict:
    """The starting head's agreement on the run's corpora, before any step (kept in ``OUT.partial/``
    for a resumed run, whose weights have moved)."""
    kept = partial / "init-agreement.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    with status("scoring the starting head (--init) before training"):
        start = {"heldout": trainer.agreement(heldout),
                 "validation": None if validation is None else trainer.agreement(validation)}
    partial.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(start))
    return start


def generate_text(loaded, specs: tuple[CorpusSpec, ...], folder: Path, bar: Bar, started: float, batch: int) -> dict:
    """``--text-only``: the corpora's self-distilled text, generated into the store and nothing else."""
    from simspec.distill.corpus import corpus_sequences
    from simspec.distill.textstore import TextStore
    from simspec.machine import machine

    store = TextStore(folder)
    before = len(store)
    for spec in specs:
        corpus_sequences(loaded, spec, bar, store, batch)
    seconds = time.perf_counter() - started
    return {"text_store": str(folder), "rows": len(store), "new_rows": len(store) - before,
            "generated_tokens": store.added_tokens, "seconds": seconds,
            "tokens_per_s": store.added_tokens / seconds if seconds else 0.0, "machine": machine(str(loaded.device))}
