"""Teacher data for drafters: token sequences with the target's features and greedy labels.

The text mixes ``simspec.distill.sources`` by token budget: human text and the target's own
continuations of prompt pools (greedy, cut after their first end-of-sequence token as decoding
is, or sampled). A batched teacher pass records at every position the target's final-norm
hidden state (what an EAGLE-1/2 head reads), the inputs of three decoder layers (what an EAGLE-3
head fuses) and its greedy next token: labels are the target's, never the dataset's. The result
is cached, keyed by all that determines it, its features in memory-mapped files (a 2 M-token
corpus's are ~17 GB); the self-distilled text is kept per prompt in a ``TextStore`` as it goes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from simspec import __version__
from simspec.cache import cache_dir
from simspec.distill.sources import CORPUS_SPLITS, SAMPLED, SELF_SOURCES, code_texts, self_prompts, sharegpt_texts
from simspec.distill.textstore import TextStore, stored_continuations
from simspec.engine.modeling import aux_layer_ids, base_and_head, head_logits
from simspec.engine.models import LoadedModel, dtype_name, eos_token_ids
from simspec.errors import SimspecError

log = logging.getLogger("simspec")
SOURCES = ("sharegpt", "code", *SELF_SOURCES)
# Prompts the target continues at once (batched greedy decoding): on 2 fp32 cores a decode step
# costs about as much at 128 rows as at 64 and 1.5x less per token than at 32; 256 is slower again
# (research/scripts/teacher-generation.py).
GENERATION_BATCH = 128


@dataclass(frozen=True)
class CorpusSpec:
    sources: tuple[str, ...]
    tokens: int  # total tokens, split between sources by ``shares``
    shares: tuple[float, ...] | None = None  # per source, summing to 1 (None: even)
    seq_len: int = 384  # room for a 256-token prompt and a 128-token continuation
    self_new_tokens: int = 128  # length of each self-distilled continuation
    seed: int = 0
    split: str = "train"  # prompt split the text comes from (``CORPUS_SPLITS``); "heldout" only for evaluation sets
    dtype: str = "fp32"  # the teacher's dtype: labels and features are the target's in that dtype
    cut_at_eos: bool = True  # self-distilled text ends at its first end-of-sequence token
    part: tuple[int, int] | None = None  # (k, n): the k-th of n disjoint parts of every source (``in_part``)

    def __post_init__(self) -> None:
        bad = [s for s in self.sources if s not in SOURCES]
        if bad or not self.sources:
            raise SimspecError(f"--data takes a comma-separated subset of {','.join(SOURCES)} (each optionally "
                               f"NAME:SHARE), got {bad or 'nothing'}")
        if self.shares is not None and (len(self.shares) != len(self.sources) or min(self.shares) <= 0
                                        or abs(sum(self.shares) - 1) > 1e-6):
            raise SimspecError(f"--data shares must be positive and sum to 1, got {list(self.shares)}")
        if self.split not in CORPUS_SPLITS:
            raise SimspecError(f"unknown corpus split {self.split!r}: one of {', '.join(CORPUS_SPLITS)}")
        if self.part is not None and not (len(self.part) == 2 and 1 <= self.part[0] <= self.part[1] >= 2):
            raise SimspecError(f"--part takes K/N, the K-th of N parts (N >= 2, 1 <= K <= N), e.g. 2/4; got "
                               f"{'/'.join(map(str, self.part))}")
        if self.tokens < self.seq_len:
            raise SimspecError(f"--tokens must be at least one sequence ({self.seq_len}), got {self.tokens}")

    def key(self, target_name: str) -> str:
        fields = asdict(self)
        version = 3 if fields.pop("cut_at_eos") else 2  # version 2: the corpus before the cut, same key as then
        if fields["part"] is None:  # the whole corpus keeps the key it had before parts
            del fields["part"]
        blob = json.dumps({**fields, "target": target_name, "version": version}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class Corpus:
    tokens: torch.Tensor  # [N, T] int64
    features: torch.Tensor  # [N, T, H] float16: target hidden state (after the final norm) at each position
    aux: torch.Tensor  # [N, T, 3H] float16: inputs of the target layers ``meta["aux_layers"]``
    labels: torch.Tensor  # [N, T] int64: target's greedy next token after each position
    valid: torch.Tensor  # [N, T] bool: real (non-padding) positions
    meta: dict


def cut_at_eos(sequence: list[int], prompt_length: int, eos: frozenset[int]) -> list[int]:
    """The sequence up to and including the first end-of-sequence token of its continuation:
    decoding stops there, so the greedy text generated past it is never drafted against."""
    for i in range(prompt_length, len(sequence)):
        if sequence[i] in eos:
            return sequence[:i + 1]
    return sequence


def _mapped(shape: tuple[int, ...], file: Path | None, dtype: torch.dtype = torch.float16, write: bool = True
            ) -> torch.Tensor:
    """Zeros in memory, or ``file`` mapped into memory (``write``: created zero-filled if missing,
    writes to the tensor going to the file)."""
    if file is None:
        return torch.zeros(shape, dtype=dtype)
    return torch.from_file(str(file), shared=write, size=math.prod(shape), dtype=dtype).view(shape)


PROGRESS_FILE, PROGRESS_SECONDS = "progress.json", 60.0


def _digest(sequences: list[list[int]], seq_len: int, target: LoadedModel) -> str:
    """What the teacher pass's output depends on: the text, its cut and the target (name, dtype)."""
    h = hashlib.sha256(f"{target.name}|{dtype_name(target.model.dtype)}|{seq_len}|{len(sequences)}".encode())
    for seq in sequences:
        h.update(len(seq).to_bytes(4, "little"))
        h.update(torch.tensor(seq[:seq_len], dtype=torch.int32).numpy().tobytes())
    return h.hexdigest()


def _resume_point(store: Path, digest: str) -> int:
    """Rows an earlier pass over the same text finished in ``store``; else 0, its files cleared."""
    try:
        progress = json.loads((store / PROGRESS_FILE).read_text())
        if progress["digest"] == digest:
            return int(progress["rows_done"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for name in ("features.f16", "aux.f16", "labels.i64", PROGRESS_FILE):
        (store / name).unlink(missing_ok=True)
    return 0


@torch.inference_mode()
def teacher_pass(target: LoadedModel, sequences: list[list[int]], seq_len: int, batch: int = 8,
                 advance: Callable[[int], None] = lambda n: None, store: Path | None = None) -> Corpus:
    """Features and greedy labels of the target at every position of every sequence; with ``store``
    (a folder) written to files there, the pass resuming where an earlier one over the same text
    stopped (progress recorded every ``PROGRESS_SECONDS``: a large corpus takes hours on a CPU)."""
    base, head = base_and_head(target.model)
    hidden = target.model.config.hidden_size
    layers = aux_layer_ids(target.model.config.num_hidden_layers)
    n = len(sequences)
    tokens = torch.zeros((n, seq_len), dtype=torch.long)
    valid = torch.zeros((n, seq_len), dtype=torch.bool)
    for i, seq in enumerate(sequences):
        seq = seq[:seq_len]
        tokens[i, : len(seq)] = torch.tensor(seq)
        valid[i, : len(seq)] = True
    digest = None if store is None else _digest(sequences, seq_len, target)
    done = 0 if store is None else _resume_point(store, digest)
    features = _mapped((n, seq_len, hidden), store and store / "features.f16")
    aux = _mapped((n, seq_len, len(layers) * hidden), store and store / "aux.f16")
    labels = _mapped((n, seq_len), store and store / "labels.i64", torch.long)
    lengths = valid.sum(1)
    # Similar lengths batched (little padding computed), longest first: later, smaller batches reuse the
    # memory the first ones freed (ascending, each batch outgrew the heap glibc kept: +1.6 GB per 400 rows).
    order = torch.argsort(lengths, descending=True, stable=True)
    if done:
        advance(done)
    saved, start = time.monotonic(), done
    try:
        for start in range(done, n, batch):
            rows = order[start:start + batch]
            width = int(lengths[rows].max())
            # Right padding + causal attention: padded tail positions never influence real ones.
            out = base(input_ids=tokens[rows, :width].to(target.device), output_hidden_states=True)
            h = out.last_hidden_state
            features[rows, :width] = h.to(torch.float16).cpu()
            # hidden_states[i] is the input of decoder layer i (0: the embeddings).
            aux[rows, :width] = torch.cat([out.hidden_states[i] for i in layers], -1).to(torch.float16).cpu()
            labels[rows, :width] = head_logits(head, h.reshape(-1, hidden)).argmax(-1).view(len(rows), width).cpu()
            advance(len(rows))
            if store is not None and time.monotonic() - saved > PROGRESS_SECONDS:
                # mapped pages stay the kernel's when the process dies: rows written are rows kept
                _save_progress(store, digest, start + len(rows))
                saved = time.monotonic()
    except BaseException:  # stopped (SIGINT/SIGTERM, an error): the rows before this batch are whole
        if store is not None and start > done:
            _save_progress(store, digest, start)
        raise
    return Corpus(tokens, features, aux, labels, valid, {"aux_layers": list(layers)})


def _save_progress(store: Path, digest: str, rows_done: int) -> None:
    tmp = store / (PROGRESS_FILE + ".tmp")
    tmp.write_text(json.dumps({"digest": digest, "rows_done": rows_done}))
    tmp.replace(store / PROGRESS_FILE)


def corpus_sequences(target: LoadedModel, spec: CorpusSpec, progress: Callable[[str, int], Callable[[int], None]],
                     store: TextStore, batch: int = GENERATION_BATCH) -> tuple[list[list[int]], dict]:
    """The token sequences of ``spec`` and their count per source, self-distilled text taken from
    ``store`` or generated into it ``batch`` prompts at a time."""
    if dtype_name(target.model.dtype) != spec.dtype:
        raise SimspecError(f"the teacher corpus wants the target in {spec.dtype}, it is loaded in "
                           f"{dtype_name(target.model.dtype)}")
    rng = random.Random(spec.seed)
    shares = spec.shares or tuple(1 / len(spec.sources) for _ in spec.sources)
    sequences: list[list[int]] = []
    counts = {}
    for source, share in zip(spec.sources, shares):
        per_source = int(spec.tokens * share)
        if source == "sharegpt":
            seqs = sharegpt_texts(target.tokenizer, per_source, spec.seq_len, rng, spec.split, spec.part)
        elif source == "code":
            seqs = code_texts(target.tokenizer, per_source, spec.seq_len, rng, spec.part)
        else:
            prompts = self_prompts(target.tokenizer, source, per_source, spec.seq_len, spec.self_new_tokens,
                                   spec.split, rng, spec.part)
            temperature = SAMPLED.get(source, 0.0)
            kind = f"sampled at T = {temperature:g}" if temperature else "greedy"
            tick = progress(f"self-distillation of {source} prompts (target {kind} text)", len(prompts))
            eos = eos_token_ids(target)
            full = stored_continuations(target, prompts, spec.self_new_tokens, batch, store, tick,
                                        temperature=temperature, seed=spec.seed,
                                        stop=eos if spec.cut_at_eos else frozenset(), label=source)
            seqs = [(cut_at_eos(seq, len(p), eos) if spec.cut_at_eos else seq)[-spec.seq_len:]
                    for seq, p in zip(full, prompts)]
        counts[source] = {"sequences": len(seqs), "tokens": sum(len(s) for s in seqs)}
        sequences.extend(seqs)
    return sequences, counts


def build_corpus(target: LoadedModel, spec: CorpusSpec, progress: Callable[[str, int], Callable[[int], None]],
                 text_store: Path | None = None, batch: int = GENERATION_BATCH) -> Corpus:
    """The teacher corpus for ``spec`` (cached); ``progress(description, total)`` returns a tick
    function. The self-distilled text goes to ``text_store`` (a folder the caller keeps), else to
    a store beside the cache, dropped once the corpus is stored."""
    path = cache_dir() / "distill" / spec.key(target.name)
    if (path / "corpus.pt").is_file():
        try:
            return _load_cached(path)
        except (OSError, RuntimeError, KeyError, ValueError):
            log.warning("teacher cache %s unreadable; rebuilding", path)
    folder = path.with_name(path.name + ".text") if text_store is None else Path(text_store)
    sequences, counts = corpus_sequences(target, spec, progress, TextStore(folder), batch)
    tmp = path.with_name(path.name + ".tmp")  # kept if the pass stops: the next build resumes it
    tmp.mkdir(parents=True, exist_ok=True)
    tick = progress("teacher pass (features + greedy labels)", len(sequences))
    corpus = teacher_pass(target, sequences, spec.seq_len, advance=tick, store=tmp)
    corpus.meta |= {"spec": asdict(spec), "target": target.name, "sources": counts, "simspec_version": __version__}
    # corpus.pt last: the folder is complete once it is there, and renamed into place only then
    # (the mapped features follow the rename: same files).
    torch.save({"tokens": corpus.tokens, "labels": corpus.labels.clone(), "valid": corpus.valid,
                "widths": [corpus.features.shape[-1], corpus.aux.shape[-1]], "meta": json.dumps(corpus.meta)},
               tmp / "corpus.pt")
    for name in ("labels.i64", PROGRESS_FILE):  # the labels live in corpus.pt now
        (tmp / name).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    if text_store is None:
        shutil.rmtree(folder, ignore_errors=True)
    return corpus


def _load_cached(folder: Path) -> Corpus:
    """A cached corpus, its features mapped from their files (read on demand, never all in memory)."""
    blob = torch.load(folder / "corpus.pt", weights_only=True)
    rows, length = blob["tokens"].shape
    feature_width, aux_width = blob["widths"]
    return Corpus(blob["tokens"], _mapped((rows, length, feature_width), folder / "features.f16", write=False),
                  _mapped((rows, length, aux_width), folder / "aux.f16", write=False), blob["labels"],
                  blob["valid"], json.loads(blob["meta"]))
