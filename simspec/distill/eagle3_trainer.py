"""EAGLE-3 head training (``simspec train-draft --kind eagle3``): the trainer, and the heads a
run continues from (``--init``), grown to a larger draft vocabulary or widened MLP."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from simspec import __version__
from simspec.distill.corpus import Corpus
from simspec.distill.provenance import FORMAT_VERSION, check_init_fits, checked
from simspec.distill.trainer import DraftTrainer, Eagle3TrainConfig, reduced_vocabulary
from simspec.engine.eagle_checkpoint import save_eagle3
from simspec.engine.eagle_public import Eagle3Head, eagle3_for_target
from simspec.engine.formats import EAGLE3_FORMAT
from simspec.engine.modeling import base_and_head
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError


def initial_head(directory: Path, target: LoadedModel, corpus: Corpus, draft_vocab: int,
                 intermediate: int | None = None) -> Eagle3Head:
    """The EAGLE-3 head a run continues from (float32), checked against the run's target and corpus."""
    from simspec.engine.eagle_checkpoint import read_public_head

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
    check_init_fits(where, head.cfg.draft_vocab, draft_vocab, head.cfg.intermediate, intermediate)
    return head


def grown_head(head: Eagle3Head, vocab_ids: torch.Tensor, target_head: torch.nn.Module) -> Eagle3Head:
    """``head`` over the larger draft vocabulary ``vocab_ids`` (sorted, its own among them): every weight
    kept, the new tokens' ``lm_head`` rows the target's (as a fresh head's start)."""
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
    """``head`` with ``intermediate`` MLP units: new gate and up rows drawn as a fresh layer's, their
    ``down_proj`` columns zero, so it computes what ``head`` did until training moves them."""
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
    """EAGLE-3's recipe with training-time test: step k feeds each position the head's output of step
    k-1 and attends, as a draft chain does, to the target-feature keys up to its root and to the
    chain's own keys of steps 1..k (the diagonal)."""

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
        """The corpus's most frequent greedy tokens; a continued head's own first."""
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
        if self.cfg.intermediate is not None:
            shape = replace(shape, intermediate=self.cfg.intermediate)
        head = Eagle3Head(shape)
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
        """Per TTT step: (step, logits at valid positions, draft labels, the target's distribution or None)."""
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
        """Top-1 / top-10 agreement with the target's greedy token at step 1, top-1 at each unrolled step."""
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
        save_eagle3(directory, self.model, self.target, checked({
            "format": EAGLE3_FORMAT, "format_version": FORMAT_VERSION, "kind": "eagle3", "target": self.target.name,
            "train_config": asdict(self.cfg), "simspec_version": __version__,
            "draft_vocab_coverage": self.coverage(), "steps": self.step, **meta,
        }))
        (directory / "history.json").write_text(json.dumps(self.history))
