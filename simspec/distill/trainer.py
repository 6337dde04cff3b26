"""Training drafters on a teacher corpus (``simspec train-draft``; EAGLE-3 heads in
``eagle3_trainer``): the target's greedy token over a reduced draft vocabulary, one loop (AdamW,
warm-up then cosine, clipping, a checkpoint every 100 steps), deterministic from the seed.

- EAGLE (EAGLE-1 loss): cross-entropy plus ``feature_weight`` x smooth-L1 to the target's
  feature; with ``unroll = 2`` a second pass feeds the head's own features back (a cheap form of
  EAGLE-3's training-time test: what tree levels below the first see).
- LM: a small Llama on tokens only, cross-entropy against the target's greedy token.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from simspec import __version__
from simspec.distill.corpus import Corpus
from simspec.distill.provenance import FORMAT_VERSION, checked
from simspec.engine.draft_lm import DraftLMShape, build_draft_lm, save_draft_lm
from simspec.engine.eagle import EagleConfig, EagleHead, save_eagle
from simspec.engine.formats import DRAFT_LM_FORMAT
from simspec.engine.modeling import base_and_head
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError


@dataclass(frozen=True)
class TrainConfig:
    draft_vocab: int = 8192
    epochs: int = 4
    batch: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup: float = 0.02  # share of steps with linear warm-up, then cosine to 10 %
    seed: int = 0


@dataclass(frozen=True)
class EagleTrainConfig(TrainConfig):
    feature_weight: float = 1.0
    unroll: int = 2


@dataclass(frozen=True)
class Eagle3TrainConfig(TrainConfig):
    ttt_steps: int = 4  # training-time test: steps the head is unrolled on its own outputs
    step_decay: float = 0.8  # weight of step k's loss: decay ** k (EAGLE-3's)
    autocast_bf16: bool = True  # bf16 matmuls; train-draft sets it where the CPU multiplies them natively
    soft_labels: bool = True  # EAGLE's loss: cross-entropy against the target's whole distribution
    init: str | None = None  # an EAGLE-3 head to continue from (its weights and draft vocabulary)
    intermediate: int | None = None  # the head's MLP width (None: the target's, or the continued head's)


@dataclass(frozen=True)
class LMTrainConfig(TrainConfig):
    shape: DraftLMShape = field(default_factory=DraftLMShape)


def reduced_vocabulary(labels: torch.Tensor, valid: torch.Tensor, size: int, always: list[int]) -> torch.Tensor:
    """The ``size`` token ids the target emits most often (ties by id), ``always`` first."""
    counts = torch.bincount(labels[valid], minlength=int(max(labels.max(), max(always, default=0))) + 1)
    counts[torch.tensor(always, dtype=torch.long)] = counts.max() + 1
    order = torch.sort(-counts, stable=True).indices[:size]
    return torch.sort(order).values


def _lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    warm = max(1, int(cfg.warmup * total))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


class DraftTrainer:
    """The shared loop; subclasses define ``build_model``, ``losses`` and ``_scored`` (what ``agreement``
    scores), or ``agreement`` itself."""

    def __init__(self, target: LoadedModel, corpus: Corpus, cfg: TrainConfig) -> None:
        self.target, self.corpus, self.cfg = target, corpus, cfg
        self.vocab_ids = self.vocabulary()
        index = torch.full((target.model.config.vocab_size,), -100, dtype=torch.long)
        index[self.vocab_ids] = torch.arange(len(self.vocab_ids))
        self.to_draft = index  # target id -> draft index (-100: not in the draft vocabulary)
        torch.manual_seed(cfg.seed)
        self.model = self.build_model()
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad],
                                           lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.steps_per_epoch = math.ceil(len(corpus.tokens) / cfg.batch)
        self.total_steps = self.steps_per_epoch * cfg.epochs
        self.step = 0
        self.history: list[dict] = []
        self.seconds = 0.0  # training wall time over every run that reached the current step

    def vocabulary(self) -> torch.Tensor:
        """The draft vocabulary: the ``draft_vocab`` tokens the target emits most in the corpus."""
        target = self.target
        eos = sorted({t for t in [target.tokenizer.eos_token_id, target.model.config.eos_token_id] if t is not None})
        return reduced_vocabulary(self.corpus.labels, self.corpus.valid, self.cfg.draft_vocab, eos)

    def build_model(self) -> torch.nn.Module:
        raise NotImplementedError

    def losses(self, idx: torch.Tensor) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def _scored(self, corpus: Corpus, sl: slice) -> tuple[torch.Tensor, torch.Tensor]:
        """The draft's logits over its vocabulary at the valid positions of sequences ``sl`` (teacher-forced,
        depth 1), and the target's greedy tokens there."""
        raise NotImplementedError

    @torch.no_grad()
    def agreement(self, corpus: Corpus) -> dict:
        """Top-1 / top-10 agreement with the target's greedy token."""
        self.model.eval()
        hits1 = hits10 = n = 0
        for start in range(0, len(corpus.tokens), 8):
            logits, truth = self._scored(corpus, slice(start, start + 8))
            top10 = self.vocab_ids[logits.topk(10, dim=-1).indices]
            hits1 += int((top10[:, 0] == truth).sum())
            hits10 += int((top10 == truth[:, None]).any(-1).sum())
            n += len(truth)
        return {"top1": hits1 / max(1, n), "top10": hits10 / max(1, n), "positions": n}

    def coverage(self) -> float:
        """Share of the corpus's greedy labels inside the draft vocabulary."""
        labels = self.corpus.labels[self.corpus.valid]
        return float((self.to_draft[labels] >= 0).float().mean())

    def train(self, checkpoint: Path, advance: Callable[[dict], None] = lambda s: None,
              checkpoint_every: int = 100) -> None:
        self._resume(checkpoint)
        self.model.train()
        # A resumed run adds its time to the checkpoint's, so the card reports what the head cost;
        # steps done after the last checkpoint by a stopped run are lost and not counted.
        run_started, seconds_before = time.perf_counter(), self.seconds
        while self.step < self.total_steps:
            epoch, offset = divmod(self.step, self.steps_per_epoch)
            generator = torch.Generator().manual_seed(self.cfg.seed + epoch)
            order = torch.randperm(len(self.corpus.tokens), generator=generator)
            idx = order[offset * self.cfg.batch:(offset + 1) * self.cfg.batch]
            for group in self.optimizer.param_groups:
                group["lr"] = _lr_at(self.step, self.total_steps, self.cfg)
            loss, stats = self.losses(idx)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.step += 1
            stats |= {"step": self.step, "epoch": epoch, "loss": loss.item()}
            self.history.append(stats)
            self.seconds = seconds_before + time.perf_counter() - run_started
            advance(stats)
            if self.step % checkpoint_every == 0 or self.step == self.total_steps:
                self._save_checkpoint(checkpoint)
        self.model.eval()

    def _save_checkpoint(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                    "history": self.history, "seconds": self.seconds, "config": asdict(self.cfg)}, tmp)
        tmp.replace(path)

    def _resume(self, path: Path) -> None:
        if not path.is_file():
            return
        state = torch.load(path, weights_only=False)
        if state["config"] != asdict(self.cfg):
            raise SimspecError(f"{path} holds a run with other settings: delete {path.parent} to start afresh")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.history = state["step"], state["history"]
        self.seconds = state.get("seconds", 0.0)  # checkpoints before this field: their time is unknown


class EagleTrainer(DraftTrainer):
    cfg: EagleTrainConfig

    def __init__(self, target: LoadedModel, corpus: Corpus, cfg: EagleTrainConfig) -> None:
        base, lm_head = base_and_head(target.model)
        self.embed = base.get_input_embeddings()
        super().__init__(target, corpus, cfg)
        self.head_weight = lm_head.weight[self.vocab_ids].detach().contiguous()

    def build_model(self) -> torch.nn.Module:
        return EagleHead(EagleConfig.for_target(self.target, len(self.vocab_ids)))

    def losses(self, idx: torch.Tensor) -> tuple[torch.Tensor, dict]:
        c = self.corpus
        width = int(c.valid[idx].sum(1).max())  # no compute on the batch's common padding
        f = c.features[idx, :width].float()
        x, y, valid = c.tokens[idx, :width], c.labels[idx, :width], c.valid[idx, :width]
        feats_in, emb = f[:, :-1], self.embed(x[:, 1:]).float()
        positions = torch.arange(1, x.shape[1]).expand(len(idx), -1)
        target_feat, target_tok, mask = f[:, 1:], self.to_draft[y[:, 1:]], valid[:, 1:]
        total, stats = 0.0, {}
        for step in range(self.cfg.unroll):
            out = self.model(feats_in, emb, positions)
            logits = torch.mm(out[mask], self.head_weight.T)
            ce = F.cross_entropy(logits, target_tok[mask], ignore_index=-100)
            reg = F.smooth_l1_loss(out[mask], target_feat[mask])
            total = total + ce + self.cfg.feature_weight * reg
            with torch.no_grad():
                ok = target_tok[mask] >= 0
                stats[f"top1_step{step + 1}"] = float((logits.argmax(-1) == target_tok[mask])[ok].float().mean())
            stats[f"ce_step{step + 1}"], stats[f"reg_step{step + 1}"] = float(ce), float(reg)
            # Next pass: the head's own predictions replace the target's features as inputs.
            feats_in = torch.cat([f[:, :1], out[:, :-1]], dim=1)
        return total / self.cfg.unroll, stats

    def _scored(self, corpus: Corpus, sl: slice) -> tuple[torch.Tensor, torch.Tensor]:
        f, x, y, mask = corpus.features[sl].float(), corpus.tokens[sl], corpus.labels[sl], corpus.valid[sl, 1:]
        out = self.model(f[:, :-1], self.embed(x[:, 1:]), torch.arange(1, x.shape[1]).expand(len(x), -1))
        return torch.mm(out[mask], self.head_weight.T), y[:, 1:][mask]

    def save(self, directory: Path, meta: dict) -> None:
        save_eagle(directory, self.model, self.vocab_ids, checked({
            "target": self.target.name, "train_config": asdict(self.cfg), "simspec_version": __version__,
            "draft_vocab_coverage": self.coverage(), "steps": self.step, **meta,
        }))
        (directory / "history.json").write_text(json.dumps(self.history))



class LMTrainer(DraftTrainer):
    cfg: LMTrainConfig

    def build_model(self) -> torch.nn.Module:
        return build_draft_lm(self.target, self.cfg.shape)

    def _draft_logits(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # Right padding under a causal mask: padded tails never reach real positions.
        hidden = self.model.model(input_ids=tokens).last_hidden_state
        head = self.model.get_output_embeddings().weight[self.vocab_ids]
        return torch.mm(hidden[mask], head.T)

    def losses(self, idx: torch.Tensor) -> tuple[torch.Tensor, dict]:
        c = self.corpus
        width = int(c.valid[idx].sum(1).max())
        tokens, labels, mask = c.tokens[idx, :width], c.labels[idx, :width], c.valid[idx, :width]
        truth = self.to_draft[labels[mask]]
        logits = self._draft_logits(tokens, mask)
        loss = F.cross_entropy(logits, truth, ignore_index=-100)
        with torch.no_grad():
            top1 = float((logits.argmax(-1) == truth)[truth >= 0].float().mean())
        return loss, {"ce": loss.item(), "top1": top1}

    def _scored(self, corpus: Corpus, sl: slice) -> tuple[torch.Tensor, torch.Tensor]:
        mask = corpus.valid[sl]
        return self._draft_logits(corpus.tokens[sl], mask), corpus.labels[sl][mask]

    def save(self, directory: Path, meta: dict) -> None:
        save_draft_lm(directory, self.model, self.target.tokenizer, self.vocab_ids, checked({
            "format": DRAFT_LM_FORMAT, "format_version": FORMAT_VERSION, "target": self.target.name,
            "train_config": asdict(self.cfg), "simspec_version": __version__,
            "config": {"draft_vocab": len(self.vocab_ids)}, "draft_vocab_coverage": self.coverage(),
            "steps": self.step, **meta,
        }))
        (directory / "history.json").write_text(json.dumps(self.history))
