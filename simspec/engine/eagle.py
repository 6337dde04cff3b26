"""EAGLE-style feature drafter: one decoder layer that reads the target's own hidden states.

At position t the head reads ``[f_t ; e(x_{t+1})]`` — the target's last hidden state (after its
final norm) at token t and the embedding of the next token — mixes them with a linear layer,
runs one Llama-style decoder layer with its own KV cache, and predicts the feature at t+1.
That feature goes through the target's (frozen) LM head restricted to a reduced *draft
vocabulary* (the tokens the target emits most often; ids map back to the target's), because
on a CPU the full 49,152-row head costs more than the layer itself. Deeper tree levels feed
the head's own predicted features instead of the target's.

Only the mixer, the layer and the id map are stored; the embedding and the head rows come
from the target at load time, so a drafter file is a few MB and cannot drift from its target.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from simspec.engine.drafter import Drafter
from simspec.engine.formats import SIMSPEC_EAGLE
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
        rope = getattr(c, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))
        return cls(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size,
                   float(theta), float(c.rms_norm_eps), draft_vocab, c.vocab_size)


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

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions[..., None].float() * self.inv_freq
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos()[..., None, :, :], angles.sin()[..., None, :, :]  # [B, 1, T, hd]

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                cache: KVCache | None = None) -> torch.Tensor:
        """x [B, T, H], positions [B, T]; ``mask`` additive [B|1, 1, T, S] or None for causal."""
        cfg, hd = self.cfg, self.cfg.head_dim
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, cfg.heads, hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, cfg.kv_heads, hd).permute(2, 0, 3, 1, 4)
        cos, sin = self.rope(positions)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            k, v = cache.append(k, v)
        attn = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None and cache is None, enable_gqa=True
        )
        x = x + self.o(attn.transpose(1, 2).reshape(b, t, cfg.heads * hd))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class KVCache:
    """A preallocated single-layer KV cache: appending writes in place, trimming moves a
    pointer (no concatenation per step, which a growing cache would cost)."""

    def __init__(self, kv_heads: int, head_dim: int, capacity: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (1, kv_heads, capacity, head_dim)
        self.keys = torch.empty(shape, device=device, dtype=dtype)
        self.values = torch.empty(shape, device=device, dtype=dtype)
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + k.shape[2]
        if end > self.keys.shape[2]:
            raise SimspecError(f"draft KV cache overflow ({end} > {self.keys.shape[2]} positions)")
        self.keys[:, :, self.length:end] = k
        self.values[:, :, self.length:end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]


class FeatureHead(nn.Module):
    """What ``EagleDrafter`` drives: a one-layer head over target features (simspec's own,
    or a public EAGLE-3 / EAGLE-1/2 checkpoint, ``eagle_public.py``, ``eagle_checkpoint.py``)."""

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
    """simspec's head: feature/embedding mixer and one decoder layer; scored by the target's
    own LM head rows over the draft vocabulary (bound at load, never stored)."""

    def __init__(self, cfg: EagleConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.kv_heads, self.head_dim, self.feature_width = cfg.kv_heads, cfg.head_dim, cfg.hidden
        self.mix = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=False)
        self.layer = DecoderLayer(cfg)

    def forward(self, features: torch.Tensor, embeddings: torch.Tensor, positions: torch.Tensor,
                mask: torch.Tensor | None = None, cache: KVCache | None = None) -> torch.Tensor:
        """Predicted next features [B, T, H] from target features and next-token embeddings."""
        return self.layer(self.mix(torch.cat([features, embeddings], dim=-1)), positions, mask, cache)

    def bind(self, head_rows: torch.Tensor) -> EagleHead:
        self.register_buffer("head_rows", head_rows.contiguous(), persistent=False)
        return self

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        return torch.mm(self.head_rows, out.T).T  # see modeling.head_logits


class EagleDrafter(Drafter):
    """A ``FeatureHead`` bound to its target: the engine's drafter interface. ``vocab_ids``
    maps draft indices to target ids (None: the head scores the full vocabulary)."""

    uses_target_hidden = True

    def __init__(self, head: FeatureHead, vocab_ids: torch.Tensor | None, target: LoadedModel, name: str,
                 max_positions: int | None = None) -> None:
        self.head = head.eval().requires_grad_(False)
        self.name = name
        self.device = target.device
        self.feature_layers, self.feature_width = head.feature_layers, head.feature_width
        self.embed = base_and_head(target.model)[0].get_input_embeddings()
        self.draft_vocab = None if vocab_ids is None else vocab_ids.to(self.device)  # draft index -> target id
        self.max_positions = max_positions or int(getattr(target.model.config, "max_position_embeddings", 8192))
        self.dtype = self._dtype = self.embed.weight.dtype

    def reset(self, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        self.cache = KVCache(self.head.kv_heads, self.head.head_dim, self.max_positions + 1024, self.device,
                             self._dtype)
        # Pairs (f_t, x_{t+1}) for t < P - 1; the last prompt feature pairs with the root.
        self._pending_tokens = [prompt[1:]]
        self._pending_features = [prompt_hidden[:-1]]
        self._positions = 1  # next token position to write (x_0 has no pair)
        self._committed = 0  # cache entries belonging to the sequence
        self._node_features: list[torch.Tensor] = []  # root, then every fed tree node, this cycle

    def commit(self, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self._pending_tokens.append(tokens)
        self._pending_features.append(hidden)

    def _logprobs(self, out: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.head.logits(out).float(), dim=-1)

    def draft_root(self) -> torch.Tensor:
        tokens = torch.cat(self._pending_tokens)
        features = self.head.project(torch.cat(self._pending_features))
        self._pending_tokens, self._pending_features = [], []
        positions = torch.arange(self._positions, self._positions + len(tokens), device=self.device)
        n_new = len(tokens)
        mask = None
        if self._committed:  # causal within the new block, everything before it visible
            mask = torch.zeros((1, 1, n_new, self._committed + n_new), dtype=self._dtype, device=self.device)
            mask[0, 0, :, self._committed:] = torch.full((n_new, n_new), -math.inf, device=self.device).triu(1)
        out = self.head(features[None], self.embed(tokens)[None], positions[None], mask, self.cache)[0]
        self._positions += n_new
        self._committed = self.cache.length
        self._root_position = self._positions - 1
        self._node_features = [out[-1:]]  # index 0: the root; then every fed tree node
        return self._logprobs(out[-1:])[0]

    def draft_level(self, tokens: torch.Tensor, depth: int, visible: torch.Tensor) -> torch.Tensor:
        n, n_fed = len(tokens), visible.shape[1] - len(tokens)
        # A node's parent is its deepest visible fed slot (slots are fed level by level), or the root.
        fed_visible = visible[:, :n_fed]
        slot_index = torch.arange(1, n_fed + 1, device=self.device)
        parents = ((fed_visible * slot_index).amax(dim=1) if n_fed
                   else torch.zeros(n, dtype=torch.long, device=self.device))
        features = torch.cat(self._node_features)[parents]
        positions = torch.full((1, n), self._root_position + depth, device=self.device)
        mask = torch.zeros((1, 1, n, self._committed + n_fed + n), dtype=self._dtype, device=self.device)
        mask[0, 0, :, self._committed:].masked_fill_(~visible, -math.inf)
        out = self.head(features[None], self.embed(tokens)[None], positions, mask, self.cache)[0]
        self._node_features.append(out)
        return self._logprobs(out)

    def end_cycle(self) -> None:
        self.cache.length = self._committed
        del self._node_features[1:]  # only the root's predicted feature outlives the cycle


def save_eagle(directory: Path, head: EagleHead, vocab_ids: torch.Tensor, meta: dict) -> None:
    """Write weights (safetensors, fp16), the id map and a config with provenance."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in head.state_dict().items()}
    tensors["vocab_ids"] = vocab_ids.to(torch.int64).contiguous()
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(
        {"format": FORMAT, "format_version": FORMAT_VERSION, "config": asdict(head.cfg), **meta}, indent=2))


def retrain_eagle_advice(directory: Path) -> str:
    return f"restore it, or train it again with `simspec train-draft --kind eagle --out {directory} --force`"


def load_eagle(directory: Path, target: LoadedModel, name: str) -> EagleDrafter:
    """Load a drafter directory and bind it to ``target``; refuse one made for another target."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    config_file, weights_file = directory / "config.json", directory / "model.safetensors"
    fix = retrain_eagle_advice(directory)
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
