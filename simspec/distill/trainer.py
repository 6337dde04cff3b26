"""Training drafters on a teacher corpus (``simspec train-draft --kind eagle|lm``).

Both kinds learn the target's greedy token over a reduced draft vocabulary (the tokens the
target emits most), with the same loop: AdamW, linear warm-up then cosine, gradient clipping,
a checkpoint every 100 steps. Deterministic from the seed; a stopped run resumes from
``<out>.partial/``.

- EAGLE (EAGLE-1 loss): cross-entropy of the predicted feature's logits, plus
  ``feature_weight`` x smooth-L1 between the predicted and the target's feature. With
  ``unroll = 2`` a second pass feeds the head's own predicted features back as inputs (a
  cheap form of EAGLE-3's training-time test), which is what tree levels below the first see.
- LM: a small Llama reading tokens only; cross-entropy against the target's greedy token at
  every position (distillation on hard labels: the draft is scored on agreeing with the
  target, not with the dataset).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from simspec import __version__
from simspec.errors import SimspecError
from simspec.distill.corpus import Corpus
from simspec.engine.draft_lm import DraftLMShape, build_draft_lm, save_draft_lm
from simspec.engine.eagle import EagleConfig, EagleHead, save_eagle
from simspec.engine.eagle_public import Eagle3Head, eagle3_for_target, save_eagle3
from simspec.engine.modeling import base_and_head
from simspec.engine.models import LoadedModel


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
    autocast_bf16: bool = True  # bf16 matmuls where the CPU multiplies them natively
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
    """The loop both drafter kinds share; subclasses build ``self.model`` and define
    ``losses`` (training objective on a batch of corpus rows) and ``agreement``."""

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
            order = torch.randperm(len(self.corpus.tokens), generator=torch.Generator().manual_seed(self.cfg.seed + epoch))
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

    @torch.no_grad()
    def agreement(self, corpus: Corpus, positions: torch.Tensor | None = None) -> dict:
        """Top-1 / top-10 agreement with the target's greedy token (teacher-forced, depth 1)."""
        self.model.eval()
        hits1 = hits10 = n = 0
        for start in range(0, len(corpus.tokens), 8):
            sl = slice(start, start + 8)
            f, x, y, valid = corpus.features[sl].float(), corpus.tokens[sl], corpus.labels[sl], corpus.valid[sl]
            mask = valid[:, 1:] if positions is None else (valid & positions[sl])[:, 1:]
            out = self.model(f[:, :-1], self.embed(x[:, 1:]), torch.arange(1, x.shape[1]).expand(len(x), -1))
            logits = torch.mm(out[mask], self.head_weight.T)
            top10 = self.vocab_ids[logits.topk(10, dim=-1).indices]
            truth = y[:, 1:][mask]
            hits1 += int((top10[:, 0] == truth).sum())
            hits10 += int((top10 == truth[:, None]).any(-1).sum())
            n += int(mask.sum())
        return {"top1": hits1 / max(1, n), "top10": hits10 / max(1, n), "positions": n}

    def save(self, directory: Path, meta: dict) -> None:
        save_eagle(directory, self.model, self.vocab_ids, {
            "target": self.target.name, "train_config": asdict(self.cfg), "simspec_version": __version__,
            "draft_vocab_coverage": self.coverage(), "steps": self.step, **meta,
        })
        (directory / "history.json").write_text(json.dumps(self.history))



def initial_head(directory: Path, target: LoadedModel, corpus: Corpus, draft_vocab: int,
                 intermediate: int | None = None) -> Eagle3Head:
    """The EAGLE-3 head a run continues from (float32), checked against the run: same target,
    same fused layers, a draft vocabulary no smaller than the head's (a larger one grows it)."""
    from simspec.engine.eagle_public import read_public_head

    where = f"--init {directory}"
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise SimspecError(f"{where}: config.json is unreadable ({exc.__class__.__name__}): "
                           "give the folder of an EAGLE-3 head") from None
    head = read_public_head(directory, config, target, str(directory))
    if not isinstance(head, Eagle3Head):
        raise SimspecError(f"{where} is an EAGLE-1/2 head: --init continues EAGLE-3 heads")
    if list(head.feature_layers) != list(corpus.meta["aux_layers"]):
        raise SimspecError(f"{where} fuses target layers {list(head.feature_layers)}, the corpus records "
                           f"{corpus.meta['aux_layers']}: train it afresh")
    if draft_vocab < head.cfg.draft_vocab:
        raise SimspecError(f"{where} has a draft vocabulary of {head.cfg.draft_vocab} tokens, --draft-vocab is "
                           f"{draft_vocab}: a continued head keeps its tokens; pass --draft-vocab "
                           f"{head.cfg.draft_vocab} or more")
    if intermediate is not None and intermediate < head.cfg.intermediate:
        raise SimspecError(f"{where} has an MLP of {head.cfg.intermediate} units, --intermediate-size is "
                           f"{intermediate}: a continued head keeps its units; pass {head.cfg.intermediate} or more")
    return head


def grown_head(head: Eagle3Head, vocab_ids: torch.Tensor, target_head: torch.nn.Module) -> Eagle3Head:
    """``head`` over the larger draft vocabulary ``vocab_ids`` (sorted target ids, the head's own
    among them): every weight kept, the new tokens' ``lm_head`` rows the target's own rows for
    them. A trained head's rows stay close to the target's (cosine 0.96 for the shipped head),
    so a new token starts where a fresh head would and the old ones where they were."""
    grown = Eagle3Head(replace(head.cfg, draft_vocab=len(vocab_ids)))
    state = {k: v for k, v in head.state_dict().items() if k not in ("lm_head.weight", "d2t", "t2d")}
    grown.load_state_dict(state, strict=False)
    with torch.no_grad():
        rows = target_head.weight[vocab_ids].float().clone()
        old = torch.searchsorted(vocab_ids, head.target_ids())
        rows[old] = head.lm_head.weight.float()
        grown.lm_head.weight.copy_(rows)
        grown.d2t.copy_(vocab_ids - torch.arange(len(vocab_ids)))
        grown.t2d.zero_()
        grown.t2d[vocab_ids] = True
    return grown


def widened_head(head: Eagle3Head, intermediate: int, seed: int) -> Eagle3Head:
    """``head`` with ``intermediate`` MLP units: its own units kept, the new ones' gate and up rows
    drawn as a fresh layer's and their ``down_proj`` columns zero, so the widened head computes
    exactly what ``head`` did until training moves the new columns off zero."""
    wide = Eagle3Head(replace(head.cfg, intermediate=intermediate))
    own = head.cfg.intermediate
    state = head.state_dict()
    generator = torch.Generator().manual_seed(seed)
    bound = 1 / math.sqrt(head.cfg.hidden)  # nn.Linear's initial range
    mlp = "midlayer.mlp."
    for name in ("gate_proj", "up_proj"):
        fresh = (torch.rand(intermediate - own, head.cfg.hidden, generator=generator) * 2 - 1) * bound
        state[f"{mlp}{name}.weight"] = torch.cat([state[f"{mlp}{name}.weight"].float(), fresh])
    down = state[f"{mlp}down_proj.weight"].float()
    state[f"{mlp}down_proj.weight"] = torch.cat([down, down.new_zeros(head.cfg.hidden, intermediate - own)], dim=1)
    wide.load_state_dict(state)
    return wide


class Eagle3Trainer(DraftTrainer):
    """EAGLE-3's recipe: fused low/middle/high target features, its own LM head over the draft
    vocabulary, and training-time test. Step k of the unroll feeds each position the head's
    own output from step k-1 and attends, like a draft chain at inference, to the target-feature
    keys up to its root and to the chain's own keys of steps 1..k (one per step, the diagonal)."""

    cfg: Eagle3TrainConfig

    def __init__(self, target: LoadedModel, corpus: Corpus, cfg: Eagle3TrainConfig) -> None:
        base, lm_head = base_and_head(target.model)
        self.embed = base.get_input_embeddings()
        self.target_head, self.target_norm = lm_head, getattr(base, "norm", None)
        self.initial = None if cfg.init is None else initial_head(Path(cfg.init), target, corpus, cfg.draft_vocab,
                                                                  cfg.intermediate)
        super().__init__(target, corpus, cfg)
        # The target's read-out of its own final feature, restricted to the draft vocabulary:
        # the soft labels (its distribution there) come from the corpus's stored features.
        self.label_weight = lm_head.weight[self.vocab_ids].detach().float().contiguous()

    def vocabulary(self) -> torch.Tensor:
        """A fresh head's: the corpus's most frequent greedy tokens. A continued head's: its own,
        grown to ``draft_vocab`` by the most frequent of the others."""
        if self.initial is None:
            return super().vocabulary()
        own = self.initial.target_ids()
        if self.cfg.draft_vocab == len(own):  # as the head stores it: its lm_head rows follow this order
            return own
        return reduced_vocabulary(self.corpus.labels, self.corpus.valid, self.cfg.draft_vocab, own.tolist())

    def build_model(self) -> torch.nn.Module:
        if self.initial is not None:
            head = self.initial if len(self.vocab_ids) == self.initial.cfg.draft_vocab \
                else grown_head(self.initial, self.vocab_ids, self.target_head)
            if self.cfg.intermediate is not None and self.cfg.intermediate > head.cfg.intermediate:
                head = widened_head(head, self.cfg.intermediate, self.cfg.seed)
            head.d2t.requires_grad_(False)
            return head
        shape = eagle3_for_target(self.target, len(self.vocab_ids), tuple(self.corpus.meta["aux_layers"]))
        head = Eagle3Head(shape if self.cfg.intermediate is None else replace(shape, intermediate=self.cfg.intermediate))
        with torch.no_grad():  # start as the target's own read-out of a feature: its norm and head rows
            head.lm_head.weight.copy_(self.target_head.weight[self.vocab_ids].float())
            if self.target_norm is not None:
                head.norm.weight.copy_(self.target_norm.weight.float())
            head.d2t.copy_(self.vocab_ids - torch.arange(len(self.vocab_ids)))
            head.t2d.zero_()
            head.t2d[self.vocab_ids] = True
        head.d2t.requires_grad_(False)
        return head

    def _unrolled(self, idx: torch.Tensor, steps: int, soft: bool = False):
        """Yields (step, logits over valid positions, draft-vocabulary labels, the target's
        distribution over the draft vocabulary there or None) for each TTT step."""
        c, model = self.corpus, self.model
        layer, attn = model.midlayer, model.midlayer.self_attn
        width = int(c.valid[idx].sum(1).max())
        x, y, valid = c.tokens[idx, :width], c.labels[idx, :width], c.valid[idx, :width]
        n, b = width - 1, len(idx)
        emb = self.embed(x).float()
        # Position i + 1's label distribution: softmax of the target's logits from its feature there.
        target_logits = torch.matmul(c.features[idx, 1:width].float(), self.label_weight.T) if soft else None
        h = model.fc(c.aux[idx, :n].float())  # step 0 at index i reads (a_i, x_{i+1}) at position i+1
        scale = 1 / math.sqrt(attn.cfg.head_dim)
        group = attn.cfg.heads // attn.cfg.kv_heads
        keys, values = [], []
        for k in range(min(steps, n)):
            m = n - k  # indices whose chain still has a token to read
            h, e = h[:, :m], emb[:, 1 + k:1 + k + m]
            positions = torch.arange(1 + k, 1 + k + m).expand(b, -1)
            q, key, value = attn.qkv(layer.attention_input(e, h), positions)
            keys.append(key.repeat_interleave(group, 1))
            values.append(value.repeat_interleave(group, 1))
            k0, v0 = keys[0][:, :, :m], values[0][:, :, :m]
            scores = [torch.matmul(q, k0.transpose(-1, -2)).masked_fill(
                torch.ones(m, m, dtype=torch.bool).triu(1), -math.inf)]
            scores += [(q * kj[:, :, :m]).sum(-1, keepdim=True) for kj in keys[1:]]
            p = torch.softmax(torch.cat(scores, -1).float() * scale, -1).to(q.dtype)
            attended = torch.matmul(p[..., :m], v0)
            for j, vj in enumerate(values[1:]):
                attended = attended + p[..., m + j:m + j + 1] * vj[:, :, :m]
            h = layer.finish(h, attn.o_proj(attended.transpose(1, 2).reshape(b, m, -1)))
            mask = valid[:, 1 + k:1 + k + m]
            probs = None if target_logits is None else torch.softmax(target_logits[:, k:k + m][mask].float(), -1)
            yield k, model.logits(h[mask]), self.to_draft[y[:, 1 + k:1 + k + m][mask]], probs

    def losses(self, idx: torch.Tensor) -> tuple[torch.Tensor, dict]:
        total, weights, stats = 0.0, 0.0, {}
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.autocast_bf16):
            for k, logits, truth, probs in self._unrolled(idx, self.cfg.ttt_steps, soft=self.cfg.soft_labels):
                if probs is None:
                    ce = F.cross_entropy(logits.float(), truth, ignore_index=-100)
                else:  # positions whose greedy token lies outside the draft vocabulary teach nothing (EAGLE-3's mask)
                    keep = truth >= 0
                    ce = F.cross_entropy(logits.float()[keep], probs[keep])
                total = total + self.cfg.step_decay ** k * ce
                weights += self.cfg.step_decay ** k
                with torch.no_grad():
                    ok = truth >= 0
                    stats[f"top1_step{k + 1}"] = float((logits.argmax(-1) == truth)[ok].float().mean())
                stats[f"ce_step{k + 1}"] = ce.item()
        return total / weights, stats

    @torch.no_grad()
    def agreement(self, corpus: Corpus) -> dict:
        """Top-1 / top-10 agreement with the target's greedy token, teacher-forced at step 1, and
        top-1 at each later unrolled step (the head reading its own outputs, as in a draft chain)."""
        self.model.eval()
        saved, self.corpus = self.corpus, corpus
        hits1 = hits10 = n = 0
        deeper: dict[int, list[int]] = {}
        try:
            for start in range(0, len(corpus.tokens), 8):
                idx = torch.arange(start, min(start + 8, len(corpus.tokens)))
                for k, logits, truth, _ in self._unrolled(idx, self.cfg.ttt_steps):
                    top = logits.topk(10, dim=-1).indices
                    if k == 0:
                        hits1 += int((top[:, 0] == truth).sum())
                        hits10 += int((top == truth[:, None]).any(-1).sum())
                        n += len(truth)
                    tally = deeper.setdefault(k + 1, [0, 0])
                    tally[0] += int((top[:, 0] == truth).sum())
                    tally[1] += len(truth)
        finally:
            self.corpus = saved
        return {"top1": hits1 / max(1, n), "top10": hits10 / max(1, n), "positions": n,
                "top1_by_step": {str(k): h / max(1, t) for k, (h, t) in sorted(deeper.items())}}

    def save(self, directory: Path, meta: dict) -> None:
        save_eagle3(directory, self.model, self.target, {
            "format": "simspec-drafter-card", "format_version": 1, "kind": "eagle3", "target": self.target.name,
            "train_config": asdict(self.cfg), "simspec_version": __version__,
            "draft_vocab_coverage": self.coverage(), "steps": self.step, **meta,
        })
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

    @torch.no_grad()
    def agreement(self, corpus: Corpus) -> dict:
        """Top-1 / top-10 agreement with the target's greedy token at every position."""
        self.model.eval()
        hits1 = hits10 = n = 0
        for start in range(0, len(corpus.tokens), 8):
            sl = slice(start, start + 8)
            mask = corpus.valid[sl]
            top10 = self.vocab_ids[self._draft_logits(corpus.tokens[sl], mask).topk(10, dim=-1).indices]
            truth = corpus.labels[sl][mask]
            hits1 += int((top10[:, 0] == truth).sum())
            hits10 += int((top10 == truth[:, None]).any(-1).sum())
            n += int(mask.sum())
        return {"top1": hits1 / max(1, n), "top10": hits10 / max(1, n), "positions": n}

    def save(self, directory: Path, meta: dict) -> None:
        save_draft_lm(directory, self.model, self.target.tokenizer, self.vocab_ids, {
            "format": "simspec-draft-lm", "format_version": 1, "target": self.target.name,
            "train_config": asdict(self.cfg), "simspec_version": __version__,
            "config": {"draft_vocab": len(self.vocab_ids)}, "draft_vocab_coverage": self.coverage(),
            "steps": self.step, **meta,
        })
        (directory / "history.json").write_text(json.dumps(self.history))
