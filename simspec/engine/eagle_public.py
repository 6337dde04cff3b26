"""Public EAGLE checkpoints: EAGLE-3 heads (SGLang's and vLLM's ``LlamaForCausalLMEagle3``) and
EAGLE-1/2 heads, read and written in their own layout so one folder serves simspec and a server.

EAGLE-3 (one ``midlayer``):
    fused = fc([a_low ; a_mid ; a_high])          the inputs of three target decoder layers, 3H -> H
    h     = midlayer(input_layernorm(e(x_{t+1})), hidden_norm(fused))   q/k/v read the 2H concat;
                                                  the residual is the feature stream
    logits over the draft vocabulary = lm_head(norm(h)); target id = draft id + d2t[draft id]
    deeper tree levels feed h itself (width H) and skip fc.
EAGLE-1/2 (``layers.0``, no input_layernorm, no norm, no lm_head):
    h = layers.0(fc([e(x_{t+1}) ; f_t]))          f_t: the target's last hidden state (final norm)
    logits = the target's LM head over the full vocabulary.

Files: ``config.json`` (Llama fields) and ``model.safetensors`` or ``pytorch_model.bin``. The
embedding is always the target's. Every mismatch with the target is one error line naming
the key or config field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from simspec.engine.eagle import EagleDrafter, FeatureHead, KVCache, RMSNorm, rotate
from simspec.engine.modeling import aux_layer_ids, base_and_head, head_logits
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError

EAGLE3_ARCHITECTURE = "LlamaForCausalLMEagle3"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


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
        angles = positions[..., None].float() * self.inv_freq
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos()[:, None].to(h.dtype), angles.sin()[:, None].to(h.dtype)
        return rotate(q, cos, sin), rotate(k, cos, sin), v

    def forward(self, h: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                cache: KVCache | None) -> torch.Tensor:
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

    def bind(self, lm_head: nn.Module) -> "Eagle1Head":
        self._target_head = [lm_head]  # a list: not a submodule, never saved
        return self

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        return head_logits(self._target_head[0], out)


# -- reading ----------------------------------------------------------------------------------
def is_public_eagle(directory: Path, config: dict) -> bool:
    """An EAGLE-3 or EAGLE-1/2 head: so named by its architecture, or holding ``fc.weight``."""
    if any("eagle" in str(a).lower() for a in config.get("architectures") or []):
        return True
    return "fc.weight" in _weight_names(directory)


def _weight_file(directory: Path) -> Path | None:
    return next((directory / f for f in WEIGHT_FILES if (directory / f).is_file()), None)


def _weight_names(directory: Path) -> set[str]:
    path = _weight_file(directory)
    if path is None:
        return set()
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), "pt") as f:
                return set(f.keys())
        return set(torch.load(path, map_location="cpu", weights_only=True, mmap=True))  # keys only: nothing read
    except Exception:  # unreadable: whichever loader the config leads to reports it
        return set()


def _read_weights(directory: Path, name: str) -> dict[str, torch.Tensor]:
    path = _weight_file(directory)
    if path is None:
        raise SimspecError(f"EAGLE head {name!r}: {directory} has neither {' nor '.join(WEIGHT_FILES)}")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(blob, dict):
            raise ValueError("not a state dict")
        return blob
    except Exception as exc:  # safetensors, pickle and zip errors all mean the same thing here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SimspecError(f"EAGLE head {name!r}: {path} is corrupt ({first}): restore it from its source") from None


def _field(config: dict, key: str, kind: type, where: str, default=None):
    value = config.get(key, default)
    if value is None:
        raise SimspecError(f"{where}: config field {key!r} is missing")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise SimspecError(f"{where}: config field {key!r} must be {kind.__name__}, found {value!r}")
    if kind in (int, float) and value <= 0:
        raise SimspecError(f"{where}: config field {key!r} must be positive, found {value!r}")
    return value


def aux_layers_from(config: dict, n_layers: int, where: str) -> tuple[int, ...]:
    """The fused layers: the config's ``eagle_config.eagle_aux_hidden_state_layer_ids`` (as vLLM
    reads them: the input of each listed layer) or EAGLE-3's default (2, L/2, L-3)."""
    eagle = config.get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    if ids is None:
        return aux_layer_ids(n_layers)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise SimspecError(f"{where}: config field 'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list "
                           f"of layer indices, found {ids!r}")
    bad = [i for i in ids if not 0 <= i < n_layers]
    if bad:
        raise SimspecError(f"{where}: config field 'eagle_config.eagle_aux_hidden_state_layer_ids' names layers "
                           f"{bad}, but the target has {n_layers} (0..{n_layers - 1})")
    return tuple(ids)


def public_config(config: dict, tensors: dict[str, torch.Tensor], target: LoadedModel, where: str) -> PublicConfig:
    tc = target.model.config
    kind = "eagle3" if any(k.startswith("midlayer.") or k in ("d2t", "t2d") for k in tensors) \
        or any("eagle3" in str(a).lower() for a in config.get("architectures") or []) else "eagle1"
    if kind == "eagle3" and config.get("num_hidden_layers", 1) != 1:
        raise SimspecError(f"{where}: config field 'num_hidden_layers' is {config.get('num_hidden_layers')!r}: "
                           "simspec runs one-layer EAGLE-3 heads")
    hidden = _field(config, "hidden_size", int, where)
    heads = _field(config, "num_attention_heads", int, where)
    target_hidden = _field(config, "target_hidden_size", int, where, hidden)
    vocab = _field(config, "vocab_size", int, where)
    if vocab != tc.vocab_size:
        raise SimspecError(f"{where}: config field 'vocab_size' is {vocab}, but target {target.name!r} has "
                           f"{tc.vocab_size} tokens: this head was made for another target")
    if target_hidden != tc.hidden_size:
        field = "target_hidden_size" if "target_hidden_size" in config else "hidden_size"
        raise SimspecError(f"{where}: config field {field!r} is {target_hidden}, but target {target.name!r} has "
                           f"hidden size {tc.hidden_size}: this head was made for another target")
    if hidden != tc.hidden_size:  # the head reads the target's embeddings
        raise SimspecError(f"{where}: config field 'hidden_size' is {hidden}, but the target's embeddings are "
                           f"{tc.hidden_size} wide: simspec runs heads with the target's hidden size")
    rope_scaling = config.get("rope_scaling") or {}
    if not isinstance(rope_scaling, dict):
        raise SimspecError(f"{where}: config field 'rope_scaling' must be an object, found {rope_scaling!r}")
    scaling_kind = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
    if scaling_kind not in ("default", "linear", "llama3"):
        raise SimspecError(f"{where}: config field 'rope_scaling' has type {scaling_kind!r}; simspec supports "
                           "default, linear and llama3")
    return PublicConfig(
        kind=kind, hidden=hidden, target_hidden=target_hidden, heads=heads,
        kv_heads=_field(config, "num_key_value_heads", int, where, heads),
        head_dim=_field(config, "head_dim", int, where, hidden // heads),
        intermediate=_field(config, "intermediate_size", int, where),
        rms_eps=_field(config, "rms_norm_eps", float, where, 1e-6),
        rope_theta=_field(config, "rope_theta", float, where, 10000.0),
        rope_scaling=tuple(sorted(rope_scaling.items())),
        vocab=vocab,
        draft_vocab=_field(config, "draft_vocab_size", int, where, vocab) if kind == "eagle3" else vocab,
        aux_layers=aux_layers_from(config, tc.num_hidden_layers, where) if kind == "eagle3" else (),
        fc_bias="fc.bias" in tensors,
        attention_bias=bool(config.get("attention_bias", False)) or any(k.endswith("q_proj.bias") for k in tensors),
        norm_before_residual=bool(config.get("norm_before_residual", False)),
    )


def _canonical(tensors: dict[str, torch.Tensor], kind: str) -> dict[str, torch.Tensor]:
    """One key layout: EAGLE-3 checkpoints also circulate with ``layers.0.`` for ``midlayer.``,
    and some carry the target's embedding (``embed_tokens.weight``), which simspec takes from
    the target itself."""
    out = {}
    for key, value in tensors.items():
        key = key.removeprefix("model.")
        if key == "embed_tokens.weight":
            continue
        if kind == "eagle3" and key.startswith("layers.0."):
            key = "midlayer." + key.removeprefix("layers.0.")
        out[key] = value
    return out


def read_public_head(directory: Path, config: dict, target: LoadedModel, name: str) -> Eagle3Head | Eagle1Head:
    """A public EAGLE-3 or EAGLE-1/2 head for ``target``, in float32 on the CPU; refuse, in one
    line naming the key or field, one that does not fit it."""
    where = f"EAGLE head {name!r} ({directory})"
    tensors = _read_weights(directory, name)
    cfg = public_config(config, tensors, target, where)
    tensors = _canonical(tensors, cfg.kind)
    head = Eagle3Head(cfg) if cfg.kind == "eagle3" else Eagle1Head(cfg)
    expected = head.state_dict()
    if cfg.kind == "eagle3":
        if "d2t" not in tensors:
            if cfg.draft_vocab < cfg.vocab:
                raise SimspecError(f"{where}: key 'd2t' is missing, and draft_vocab_size {cfg.draft_vocab} < "
                                   f"vocab_size {cfg.vocab}: without it draft ids cannot be mapped to target ids")
            tensors["d2t"] = expected["d2t"]  # the identity map: draft ids are target ids
        tensors.setdefault("t2d", expected["t2d"])  # training-only
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise SimspecError(f"{where}: key {missing[0]!r} is missing ({cfg.kind} layout)"
                           + (f", and {len(missing) - 1} more" if len(missing) > 1 else ""))
    unknown = sorted(set(tensors) - set(expected))
    if unknown:
        raise SimspecError(f"{where}: key {unknown[0]!r} is not part of the {cfg.kind} layout")
    for key, value in expected.items():
        if tuple(tensors[key].shape) != tuple(value.shape):
            raise SimspecError(f"{where}: key {key!r} has shape {list(tensors[key].shape)}, the config implies "
                               f"{list(value.shape)}")
    head.load_state_dict({k: v.to(expected[k].dtype) if k in ("d2t", "t2d") else v.float()
                          for k, v in tensors.items()})
    if cfg.kind == "eagle3":
        ids = head.target_ids()
        if int(ids.min()) < 0 or int(ids.max()) >= cfg.vocab:
            raise SimspecError(f"{where}: key 'd2t' maps draft ids to target ids outside 0..{cfg.vocab - 1}")
    return head


def load_public_eagle(directory: Path, config: dict, target: LoadedModel, name: str) -> EagleDrafter:
    """Bind a public EAGLE-3 or EAGLE-1/2 head to ``target`` (in the target's dtype and device)."""
    head = read_public_head(directory, config, target, name)
    dtype = base_and_head(target.model)[0].get_input_embeddings().weight.dtype
    head.to(target.device, dtype)
    if isinstance(head, Eagle3Head):
        return EagleDrafter(head, head.target_ids(), target, name)
    return EagleDrafter(head.bind(base_and_head(target.model)[1]), None, target, name)


# -- writing ----------------------------------------------------------------------------------
def eagle3_config(head: Eagle3Head, target: LoadedModel) -> dict:
    """config.json in the fields SGLang's and vLLM's EAGLE-3 loaders read."""
    cfg, tc = head.cfg, target.model.config
    out = {
        "architectures": [EAGLE3_ARCHITECTURE], "model_type": "llama",
        "hidden_size": cfg.hidden, "target_hidden_size": cfg.target_hidden, "intermediate_size": cfg.intermediate,
        "num_attention_heads": cfg.heads, "num_key_value_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
        "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": cfg.rms_eps, "rope_theta": cfg.rope_theta,
        "max_position_embeddings": int(getattr(tc, "max_position_embeddings", 8192)),
        "vocab_size": cfg.vocab, "draft_vocab_size": cfg.draft_vocab, "tie_word_embeddings": False,
        "attention_bias": cfg.attention_bias, "torch_dtype": "float16",
        "bos_token_id": tc.bos_token_id, "eos_token_id": tc.eos_token_id,
    }
    if cfg.rope_scaling:
        out["rope_scaling"] = dict(cfg.rope_scaling)
    if cfg.norm_before_residual:
        out["norm_before_residual"] = True
    if cfg.aux_layers != aux_layer_ids(tc.num_hidden_layers):
        # Only a non-default choice is written: readers disagree on the ids' offset (vLLM reads
        # id k as the input of layer k; SGLang as its output, capturing the input of layer k + 1),
        # and both default to the inputs of layers (2, L/2, L-3).
        out["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(cfg.aux_layers)}
    return out


def save_eagle3(directory: Path, head: Eagle3Head, target: LoadedModel, card: dict) -> None:
    """The public layout (fp16 weights, ``d2t`` int64, ``t2d`` bool) plus ``simspec.json``,
    simspec's provenance card, which servers ignore."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: (v if k in ("d2t", "t2d") else v.to(torch.float16)).detach().contiguous()
               for k, v in head.state_dict().items()}
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(eagle3_config(head, target), indent=2))
    (directory / "simspec.json").write_text(json.dumps(card, indent=2))


def eagle3_for_target(target: LoadedModel, draft_vocab: int, aux_layers: tuple[int, ...] | None = None
                      ) -> PublicConfig:
    """An EAGLE-3 head's shape for ``target``: its attention shape, hidden and intermediate sizes."""
    tc = target.model.config
    rope = getattr(tc, "rope_parameters", None) or {}
    theta = rope.get("rope_theta", getattr(tc, "rope_theta", 10000.0))
    heads = tc.num_attention_heads
    return PublicConfig(
        kind="eagle3", hidden=tc.hidden_size, target_hidden=tc.hidden_size, heads=heads,
        kv_heads=tc.num_key_value_heads, head_dim=getattr(tc, "head_dim", None) or tc.hidden_size // heads,
        intermediate=tc.intermediate_size, rms_eps=float(tc.rms_norm_eps), rope_theta=float(theta),
        rope_scaling=(), vocab=tc.vocab_size, draft_vocab=draft_vocab,
        aux_layers=aux_layers or aux_layer_ids(tc.num_hidden_layers), fc_bias=False, attention_bias=False)
