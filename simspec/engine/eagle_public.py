"""Public EAGLE heads: EAGLE-3 (SGLang's and vLLM's ``LlamaForCausalLMEagle3``) and EAGLE-1/2, in
their own layout so one folder serves simspec and a server (``eagle_checkpoint`` reads and writes
the folders). The embedding is always the target's.

EAGLE-3 (one ``midlayer``):
    fused = fc([a_low ; a_mid ; a_high])          the inputs of three target decoder layers, 3H -> H
    h     = midlayer(input_layernorm(e(x_{t+1})), hidden_norm(fused))   q/k/v read the 2H concat;
                                                  the residual is the feature stream
    logits over the draft vocabulary = lm_head(norm(h)); target id = draft id + d2t[draft id]
    deeper tree levels feed h itself (width H) and skip fc.
EAGLE-1/2 (``layers.0``, no input_layernorm, no norm, no lm_head):
    h = layers.0(fc([e(x_{t+1}) ; f_t]))          f_t: the target's last hidden state (final norm)
    logits = the target's LM head over the full vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from simspec.engine.eagle import FeatureHead, RMSNorm, rope, rope_theta, rotate
from simspec.engine.kv_rows import RowSlots
from simspec.engine.modeling import aux_layer_ids, head_logits
from simspec.engine.models import LoadedModel


@dataclass(frozen=True)
class PublicConfig:
    kind: str  # "eagle3" | "eagle1"
    hidden: int
    target_hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rms_eps: float
    rope_theta: float
    rope_scaling: tuple[tuple[str, object], ...]  # the config's rope_scaling, as sorted items
    vocab: int
    draft_vocab: int
    aux_layers: tuple[int, ...]  # eagle3: target layers whose inputs are fused
    fc_bias: bool
    attention_bias: bool
    norm_before_residual: bool = False  # eagle3: the residual is the *normed* feature (some vLLM heads)


def inverse_frequencies(cfg: PublicConfig) -> torch.Tensor:
    """Rotary frequencies, with Llama's ``rope_scaling`` types that change them (linear, llama3)."""
    hd = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    scaling = dict(cfg.rope_scaling)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        return inv / float(scaling["factor"])
    if kind == "llama3":  # long wavelengths scaled down, short kept, smooth in between
        factor, low, high = (float(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        original = float(scaling["original_max_position_embeddings"])
        wavelength = 2 * math.pi / inv
        smooth = (original / wavelength - low) / (high - low)
        scaled = torch.where(wavelength > original / low, inv / factor, inv)
        between = (wavelength <= original / low) & (wavelength >= original / high)
        return torch.where(between, (1 - smooth) * inv / factor + smooth * inv, scaled)
    return inv


class Attention(nn.Module):
    """Llama attention whose q/k/v read ``width`` inputs (2H in EAGLE-3's midlayer)."""

    def __init__(self, cfg: PublicConfig, width: int) -> None:
        super().__init__()
        self.cfg = cfg
        hd, bias = cfg.head_dim, cfg.attention_bias
        self.q_proj = nn.Linear(width, cfg.heads * hd, bias=bias)
        self.k_proj = nn.Linear(width, cfg.kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(width, cfg.kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(cfg.heads * hd, cfg.hidden, bias=bias)
        self.register_buffer("inv_freq", inverse_frequencies(cfg), persistent=False)

    def qkv(self, h: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rotated queries [B, heads, T, hd], keys and values [B, kv_heads, T, hd]."""
        b, t, _ = h.shape
        hd = self.cfg.head_dim
        q = self.q_proj(h).view(b, t, -1, hd).transpose(1, 2)
        k = self.k_proj(h).view(b, t, -1, hd).transpose(1, 2)
        v = self.v_proj(h).view(b, t, -1, hd).transpose(1, 2)
        cos, sin = rope(positions, self.inv_freq, h.dtype)
        return rotate(q, cos, sin), rotate(k, cos, sin), v

    def forward(self, h: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                cache: RowSlots | None) -> torch.Tensor:
        q, k, v = self.qkv(h, positions)
        if cache is not None:
            k, v = cache.append(k, v)
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None and cache is None,
                                              enable_gqa=True)
        b, _, t, _ = attn.shape
        return self.o_proj(attn.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: PublicConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Eagle3Layer(nn.Module):
    """EAGLE-3's ``midlayer``: attention over [normed embedding ; normed feature]."""

    def __init__(self, cfg: PublicConfig) -> None:
        super().__init__()
        self.norm_before_residual = cfg.norm_before_residual
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.hidden_norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.self_attn = Attention(cfg, 2 * cfg.hidden)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def attention_input(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.input_layernorm(embeddings), self.hidden_norm(features)], dim=-1)

    def finish(self, features: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """Residual over the feature stream, then the MLP block."""
        h = (self.hidden_norm(features) if self.norm_before_residual else features) + attended
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward(self, embeddings, features, positions, mask, cache):
        return self.finish(features, self.self_attn(self.attention_input(embeddings, features), positions, mask, cache))


class Eagle1Layer(nn.Module):
    """EAGLE-1/2's ``layers.0``: a Llama layer without its input norm."""

    def __init__(self, cfg: PublicConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg, cfg.hidden)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def forward(self, h, positions, mask, cache):
        h = h + self.self_attn(h, positions, mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3Head(FeatureHead):
    def __init__(self, cfg: PublicConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.kv_heads, self.head_dim = cfg.kv_heads, cfg.head_dim
        self.feature_layers = cfg.aux_layers
        self.feature_width = len(cfg.aux_layers) * cfg.target_hidden
        self.fc = nn.Linear(self.feature_width, cfg.hidden, bias=cfg.fc_bias)
        self.midlayer = Eagle3Layer(cfg)
        self.norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.draft_vocab, bias=False)
        # Stored by the format; int64 offsets (target = draft + d2t) and a bool target-vocab mask.
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab, dtype=torch.int64))
        self.register_buffer("t2d", torch.ones(cfg.vocab, dtype=torch.bool))

    def project(self, target_features: torch.Tensor) -> torch.Tensor:
        return self.fc(target_features)

    def forward(self, features, embeddings, positions, mask=None, cache=None):
        return self.midlayer(embeddings, features, positions, mask, cache)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        return head_logits(self.lm_head, self.norm(out))

    def target_ids(self) -> torch.Tensor:
        return torch.arange(self.cfg.draft_vocab, device=self.d2t.device) + self.d2t


class Eagle1Head(FeatureHead):
    def __init__(self, cfg: PublicConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.kv_heads, self.head_dim, self.feature_width = cfg.kv_heads, cfg.head_dim, cfg.target_hidden
        self.fc = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=cfg.fc_bias)
        self.layers = nn.ModuleList([Eagle1Layer(cfg)])

    def forward(self, features, embeddings, positions, mask=None, cache=None):
        return self.layers[0](self.fc(torch.cat([embeddings, features], dim=-1)), positions, mask, cache)

    def bind(self, lm_head: nn.Module) -> Eagle1Head:
        self._target_head = [lm_head]  # a list: not a submodule, never saved
        return self

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        return head_logits(self._target_head[0], out)


def eagle3_for_target(target: LoadedModel, draft_vocab: int, aux_layers: tuple[int, ...] | None = None
                      ) -> PublicConfig:
    """An EAGLE-3 head's shape for ``target``: its attention shape, hidden and intermediate sizes."""
    tc = target.model.config
    heads = tc.num_attention_heads
    return PublicConfig(
        kind="eagle3", hidden=tc.hidden_size, target_hidden=tc.hidden_size, heads=heads,
        kv_heads=tc.num_key_value_heads, head_dim=getattr(tc, "head_dim", None) or tc.hidden_size // heads,
        intermediate=tc.intermediate_size, rms_eps=float(tc.rms_norm_eps), rope_theta=rope_theta(tc),
        rope_scaling=(), vocab=tc.vocab_size, draft_vocab=draft_vocab,
        aux_layers=aux_layers or aux_layer_ids(tc.num_hidden_layers), fc_bias=False, attention_bias=False)
