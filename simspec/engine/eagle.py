"""EAGLE-style feature drafter: one decoder layer that reads the target's own hidden states.

At position t the head mixes ``[f_t ; e(x_{t+1})]`` (the target's final-norm hidden state at t,
the next token's embedding), runs one Llama-style layer and predicts the feature at t+1, scored
by the target's LM head over a reduced *draft vocabulary* (on a CPU the full head costs more
than the layer). Deeper tree levels feed the head's own predictions. Only the mixer, the layer
and the id map are stored; the embedding and head rows come from the target at load time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from simspec.engine.drafter import Feed, RowDrafter, RowsDrafter
from simspec.engine.formats import SIMSPEC_EAGLE, retrain_advice
from simspec.engine.kv_rows import RowSlots, causal, padded
from simspec.engine.modeling import base_and_head
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError, read_json, require, require_schema

FORMAT = SIMSPEC_EAGLE
FORMAT_VERSION = 1


@dataclass(frozen=True)
class EagleConfig:
    hidden: int  # the target's hidden size (features and embeddings)
    heads: int
    kv_heads: int
    intermediate: int
    rope_theta: float
    rms_eps: float
    draft_vocab: int  # size of the reduced vocabulary
    target_vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @classmethod
    def for_target(cls, target: LoadedModel, draft_vocab: int) -> EagleConfig:
        c = target.model.config
        return cls(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size,
                   rope_theta(c), float(c.rms_norm_eps), draft_vocab, c.vocab_size)


def rope_theta(config) -> float:
    """A transformers config's rotary base."""
    rope = getattr(config, "rope_parameters", None) or {}
    return float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Statistics in fp32 whatever the weights' dtype (as Llama does): bf16 sums drift.
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (half-split convention, as Llama)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def rope(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin ``[B, 1, T, head_dim]`` of the rotary angles at ``positions`` ``[B, T]``."""
    angles = positions[..., None].float() * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos()[..., None, :, :].to(dtype), angles.sin()[..., None, :, :].to(dtype)


class DecoderLayer(nn.Module):
    """Pre-norm attention (grouped-query, rotary) + SwiGLU MLP, Llama style."""

    def __init__(self, cfg: EagleConfig) -> None:
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.attn_norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.q = nn.Linear(cfg.hidden, cfg.heads * hd, bias=False)
        self.kv = nn.Linear(cfg.hidden, 2 * cfg.kv_heads * hd, bias=False)
        self.o = nn.Linear(cfg.heads * hd, cfg.hidden, bias=False)
        self.mlp_norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.gate_up = nn.Linear(cfg.hidden, 2 * cfg.intermediate, bias=False)
        self.down = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                cache: RowSlots | None = None) -> torch.Tensor:
        """x [B, T, H], positions [B, T]; ``mask`` additive [B|1, 1, T, S] or None for causal."""
        cfg, hd = self.cfg, self.cfg.head_dim
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, cfg.heads, hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, cfg.kv_heads, hd).permute(2, 0, 3, 1, 4)
        cos, sin = rope(positions, self.inv_freq, x.dtype)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            k, v = cache.append(k, v)
        attn = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None and cache is None, enable_gqa=True
        )
        x = x + self.o(attn.transpose(1, 2).reshape(b, t, cfg.heads * hd))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class FeatureHead(nn.Module):
    """What ``EagleDrafter`` drives: simspec's one-layer head, or a public one (``eagle_public``)."""

    kv_heads: int
    head_dim: int
    feature_width: int  # width of the target features it reads
    feature_layers: tuple[int, ...] | None = None  # target layers whose inputs it fuses; None: last hidden

    def project(self, target_features: torch.Tensor) -> torch.Tensor:
        """Target features -> the width the layer reads (identity unless the head fuses layers)."""
        return target_features

    def logits(self, out: torch.Tensor) -> torch.Tensor:  # [n, H] -> [n, draft vocabulary]
        raise NotImplementedError


class EagleHead(FeatureHead):
    """simspec's head: a mixer and one decoder layer, scored by the target's LM head rows (bound at load)."""

    def __init__(self, cfg: EagleConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.kv_heads, self.head_dim, self.feature_width = cfg.kv_heads, cfg.head_dim, cfg.hidden
        self.mix = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=False)
        self.layer = DecoderLayer(cfg)

    def forward(self, features: torch.Tensor, embeddings: torch.Tensor, positions: torch.Tensor,
                mask: torch.Tensor | None = None, cache: RowSlots | None = None) -> torch.Tensor:
        """Predicted next features [B, T, H] from target features and next-token embeddings."""
        return self.layer(self.mix(torch.cat([features, embeddings], dim=-1)), positions, mask, cache)

    def bind(self, head_rows: torch.Tensor) -> EagleHead:
        self.register_buffer("head_rows", head_rows.contiguous(), persistent=False)
        return self

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        return torch.mm(self.head_rows, out.T).T  # see modeling.head_logits


class EagleRows(RowDrafter):
    """An ``EagleDrafter`` over rows."""

    def __init__(self, drafter: EagleDrafter, batch: int, capacity: int) -> None:
        super().__init__(drafter, batch)
        self.head, self.embed, self.device, self.dtype = drafter.head, drafter.embed, drafter.device, drafter.dtype
        self.cache = RowSlots(batch, capacity)
        self.positions = np.zeros(batch, dtype=np.int64)  # next token position per row
        self.features: list[list[torch.Tensor]] = [[] for _ in range(batch)]  # pending target features
        self.nodes: list[list[torch.Tensor]] = [[] for _ in range(batch)]  # root, then this cycle's fed nodes

    def reset_row(self, b: int, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        # Pairs (f_t, x_{t+1}) for t < P - 1; the last prompt feature pairs with the root.
        self.pending[b], self.features[b] = [prompt[1:]], [prompt_hidden[:-1]]
        self.positions[b], self.committed[b], self.fill[b] = 1, 0, 0
        self.nodes[b] = []

    def commit(self, b: int, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self.pending[b].append(tokens)
        self.features[b].append(hidden)

    def _forward(self, tokens: dict[int, torch.Tensor], features: dict[int, torch.Tensor],
                 positions: dict[int, np.ndarray], visible: dict[int, np.ndarray]) -> torch.Tensor:
        width = max(len(t) for t in tokens.values())
        ids = torch.zeros((self.batch, width), dtype=torch.long, device=self.device)
        feats = None
        for b, t in tokens.items():
            ids[b, : len(t)] = t
            f = features[b]
            if feats is None:
                feats = f.new_zeros((self.batch, width, f.shape[-1]))
            feats[b, : len(f)] = f
        pos = torch.as_tensor(padded(positions, self.batch, width), device=self.device)
        return self.head(feats, self.embed(ids), pos, self._begin(width, visible, self.dtype), self.cache)

    def _logprobs(self, out: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.head.logits(out).float(), dim=-1)

    def draft_root(self, rows: list[int]) -> torch.Tensor:
        tokens = {b: torch.cat(self.pending[b]) for b in rows}
        features = {b: self.head.project(torch.cat(self.features[b])) for b in rows}
        positions = {b: self.positions[b] + np.arange(len(t)) for b, t in tokens.items()}
        out = self._forward(tokens, features, positions, {b: causal(len(t)) for b, t in tokens.items()})
        last = []
        for b in rows:
            n = len(tokens[b])
            self.pending[b], self.features[b] = [], []
            self.positions[b] += n
            self.committed[b] += n
            self.fill[b] = self.committed[b]
            self.nodes[b] = [out[b, n - 1: n]]
            last.append(out[b, n - 1])
        return self._logprobs(torch.stack(last))

    def draft_level(self, rows: list[int], feeds: list[Feed]) -> list[torch.Tensor]:
        tokens, features, positions, visible = {}, {}, {}, {}
        for b, (frontier, depth, vis) in zip(rows, feeds):
            n = len(frontier)
            n_fed = vis.shape[1] - n
            # a node's parent is its deepest visible fed slot (fed level by level), or the root
            parents = (vis[:, :n_fed] * np.arange(1, n_fed + 1)).max(axis=1) if n_fed else np.zeros(n, dtype=np.int64)
            tokens[b] = torch.as_tensor(frontier, device=self.device)
            features[b] = torch.cat(self.nodes[b])[torch.as_tensor(parents, device=self.device)]
            positions[b] = np.full(n, self.positions[b] - 1 + depth)
            visible[b] = vis
        out = self._forward(tokens, features, positions, visible)
        result = []
        for b in rows:
            n = len(tokens[b])
            self.nodes[b].append(out[b, :n])
            self.fill[b] += n
            result.append(self._logprobs(out[b, :n]))
        return result

    def end_cycle(self) -> None:
        super().end_cycle()
        for b in range(self.batch):
            del self.nodes[b][1:]  # only the root's predicted feature outlives the cycle

    def release(self, b: int) -> None:
        super().release(b)
        self.features[b], self.nodes[b] = [], []


class EagleDrafter(RowsDrafter):
    """A ``FeatureHead`` bound to its target; ``vocab_ids`` maps draft indices to target ids (None: all)."""

    uses_target_hidden = True
    rows_class = EagleRows

    def __init__(self, head: FeatureHead, vocab_ids: torch.Tensor | None, target: LoadedModel, name: str) -> None:
        self.head = head.eval().requires_grad_(False)
        self.name = name
        self.device = target.device
        self.feature_layers, self.feature_width = head.feature_layers, head.feature_width
        self.embed = base_and_head(target.model)[0].get_input_embeddings()
        self.draft_vocab = None if vocab_ids is None else vocab_ids.to(self.device)  # draft index -> target id
        self.dtype = self.embed.weight.dtype


def save_eagle(directory: Path, head: EagleHead, vocab_ids: torch.Tensor, meta: dict) -> None:
    """Write weights (safetensors, fp16), the id map and a config with provenance."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in head.state_dict().items()}
    tensors["vocab_ids"] = vocab_ids.to(torch.int64).contiguous()
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(
        {"format": FORMAT, "format_version": FORMAT_VERSION, "config": asdict(head.cfg), **meta}, indent=2))


def load_eagle(directory: Path, target: LoadedModel, name: str) -> EagleDrafter:
    """Load a drafter directory and bind it to ``target``; refuse one made for another target."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    config_file, weights_file = directory / "config.json", directory / "model.safetensors"
    fix = retrain_advice(directory, {"kind": "eagle"})
    meta = read_json(config_file, f"drafter {name!r}: ", f"drafter {name!r}: {config_file} is missing: {fix}", fix)
    require_schema(meta, FORMAT, FORMAT_VERSION, config_file, fix, key="format")
    blob = require(meta, "config", dict, config_file, fix, what="an object (the drafter's architecture)")
    values = {}
    for f in fields(EagleConfig):
        kind = float if f.type == "float" else int
        values[f.name] = require(blob, f.name, kind, config_file, fix, name=f"config.{f.name}")
        if values[f.name] <= 0:
            raise SimspecError(f"{config_file}: field 'config.{f.name}' must be positive (found {values[f.name]}): "
                               f"{fix}")
    cfg = EagleConfig(**values)
    expected = EagleConfig.for_target(target, cfg.draft_vocab)
    if (cfg.hidden, cfg.target_vocab) != (expected.hidden, expected.target_vocab):
        raise SimspecError(
            f"drafter {name!r} was made for a target with hidden size {cfg.hidden} and vocabulary "
            f"{cfg.target_vocab}, but {target.name!r} has {expected.hidden} and {expected.target_vocab}: "
            "train a drafter for this target with `simspec train-draft`"
        )
    if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads or cfg.head_dim % 2:
        raise SimspecError(f"{config_file}: fields 'config.hidden', 'config.heads' and 'config.kv_heads' do not "
                           f"describe an attention layer (hidden {cfg.hidden}, heads {cfg.heads}, kv_heads "
                           f"{cfg.kv_heads}): {fix}")
    try:
        tensors = load_file(str(weights_file))
    except (OSError, SafetensorError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise SimspecError(f"drafter {name!r}: {weights_file} is missing or corrupt ({first}): {fix}") from None
    vocab_ids = tensors.pop("vocab_ids", None)
    if vocab_ids is None or vocab_ids.ndim != 1 or len(vocab_ids) != cfg.draft_vocab \
            or vocab_ids.dtype not in (torch.int64, torch.int32) \
            or int(vocab_ids.min()) < 0 or int(vocab_ids.max()) >= cfg.target_vocab:
        raise SimspecError(f"drafter {name!r}: {weights_file} lacks a valid 'vocab_ids' tensor ({cfg.draft_vocab} "
                           f"target token ids below {cfg.target_vocab}): {fix}")
    head = EagleHead(cfg)
    try:
        head.load_state_dict({k: v.float() for k, v in tensors.items()})
    except RuntimeError as exc:
        raise SimspecError(f"drafter {name!r}: weights do not match its config ({str(exc).splitlines()[0]}): "
                           f"{fix}") from None
    lm_head = base_and_head(target.model)[1]
    head.to(target.device, lm_head.weight.dtype).bind(lm_head.weight[vocab_ids.to(target.device)])
    return EagleDrafter(head, vocab_ids, target, name)
