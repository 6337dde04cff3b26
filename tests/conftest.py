"""Shared fixtures (the real demo target, loaded once per test session) and the checks that keep
the markers honest:

- a test that uses a language model's fixtures (the demo target's, or the tiny random-weight
  Llama's) is marked ``model`` by them; one that builds a tiny model itself
  (``helpers.tiny_model``) must be marked (checked when it builds it);
- a test that runs the CLI through ``helpers.simspec`` must be marked ``e2e`` (checked when it runs);
- the simulator's test modules (``helpers.NUMPY_ONLY``) must not import torch, transformers or
  stable-baselines3 while they run (each import statement watched around every test of theirs;
  their module-level imports are checked in a fresh interpreter by tests/test_layering.py).

The fast lane is ``pytest -m "not model"``: everything that runs no language model."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import helpers
import pytest

MODEL_FIXTURES = ("target", "prompt_ids", "random_drafter", "tiny", "drafters", "tiny_target_dir", "tiny_target",
                  "tiny_profile", "tiny_profile_t1")
TARGET = "smollm2-135m-instruct"
CONVERTED: list[str] = []

# The suite runs in xdist workers (addopts: -n 2): each gets its share of the cores for torch,
# set before torch is imported. Two threads per worker on two cores would oversubscribe, and
# torch's OpenMP threads then spin at every barrier: the tiny models' thousands of small ops
# ran several times slower.
THREADS = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(THREADS)
helpers.THREADS = THREADS
# The compiled runtime's tests check its caches, buckets and moves, which no compile mode
# changes; inductor's GEMM autotuning (the product's CPU default) would double their compiles.
os.environ.setdefault("SIMSPEC_COMPILE_MODE", "default")


def pytest_collection_modifyitems(config, items):
    for item in items:  # before `-m` deselects (conftest hooks run ahead of the mark plugin's)
        if set(MODEL_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker("model")


LONG_SECONDS = 10  # a bare `long` mark's weight; the longest tests state theirs: @pytest.mark.long(seconds=S)


class WorkerShares:
    """The order the workers run, set once `-m` has deselected (trylast: after the mark plugin).
    xdist's worksteal deals each of the n workers a contiguous 1/n of it and lets an idle one
    steal the tail of the longest queue, so a long test late in a queue runs last while the
    other worker idles. Each share starts with its turn of the tests marked `long`, heaviest
    first, dealt so that the shares' weights stay even; the short ones fill in after them. A
    module marked `one_worker` is dealt whole, as one unit weighing its long tests together: its
    tests share what a process compiled (torch.compile's graphs), which another worker would
    compile again."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # each worker collects, and orders, alike
        weight = lambda item: (item.get_closest_marker("long").kwargs.get("seconds", LONG_SECONDS)  # noqa: E731
                               if item.get_closest_marker("long") else 0)
        units: dict[str, list] = {}  # a unit of items dealt together: a long test, or a one_worker module
        for item in items:
            if item.get_closest_marker("one_worker"):
                units.setdefault(item.nodeid.split("::")[0], []).append(item)
            elif item.get_closest_marker("long"):
                units[item.nodeid] = [item]
        dealt = {id(i) for unit in units.values() for i in unit}
        rest = [i for i in items if id(i) not in dealt]
        shares, loads = [[] for _ in range(n)], [0] * n
        for unit in sorted(units.values(), key=lambda unit: sum(map(weight, unit)), reverse=True):
            k = min(range(n), key=lambda k: loads[k])
            shares[k] += sorted(unit, key=weight, reverse=True)
            loads[k] += sum(map(weight, unit))
        sizes = [len(items) // n + (k >= n - len(items) % n) for k in range(n)]  # worksteal's split
        for k in range(n):
            take = max(0, sizes[k] - len(shares[k]))
            shares[k], rest = shares[k] + rest[:take], rest[take:]
        shares[-1] += rest
        items[:] = [item for share in shares for item in share]


def pytest_configure(config):
    config.pluginmanager.register(WorkerShares(), "simspec-worker-shares")


def pytest_runtest_setup(item):
    helpers.RUNNING["marks"] = {mark.name for mark in item.iter_markers()}  # before any fixture runs


@pytest.fixture(autouse=True)
def _converted_target(request):
    """On a fresh machine the demo target is converted once (~20 s) and cached (see
    simspec.engine.models). Two xdist workers, or a worker and a CLI subprocess, would each
    convert it and swap the cached folder under the other's reader: the first test marked
    `model` in each worker makes sure, under a lock, that the cached copy exists."""
    if request.node.get_closest_marker("model") is not None and not CONVERTED:
        from simspec.cache import cache_dir
        from simspec.engine.models import _converted_copy, load_model, resolve_model

        lock = cache_dir() / "models" / ".simspec-tests.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
            if not (_converted_copy(resolve_model(TARGET)) / "config.json").is_file():
                load_model(TARGET)
        CONVERTED.append(TARGET)


@pytest.fixture(autouse=True)
def _torch_threads():
    # Every test starts with this worker's share of the cores, whatever the one before set
    # (the CLI's verbs set every core; the training tests, one thread).
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _numpy_only(request):
    if Path(str(request.node.fspath)).name not in helpers.NUMPY_ONLY:
        yield
        return
    with helpers.heavy_imports() as imported:
        yield
    if imported:
        pytest.fail(f"a simulator test imported {', '.join(sorted(imported))}: it belongs elsewhere (numpy only here)")


@pytest.fixture(scope="session")
def target():
    import torch

    from simspec.engine.models import load_model

    torch.set_num_threads(THREADS)
    return load_model(TARGET)


@pytest.fixture(scope="session")
def prompt_ids(target):
    """Four held-out prompts: two HumanEval, two ShareGPT, rendered with the chat template."""
    from simspec.data import load_prompts, render_chat

    chosen = load_prompts("humaneval", split="heldout", n=2) + load_prompts(
        "sharegpt", split="heldout", n=2, max_chars=600
    )
    return [(p.id, render_chat(target.tokenizer, p.text)) for p in chosen]


@pytest.fixture(scope="session")
def random_drafter(target):
    """A randomly initialised one-layer Llama over the target's vocabulary: accepts ~nothing."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from simspec.engine.drafter import CausalLMDrafter

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=target.model.config.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
    )
    return CausalLMDrafter(LlamaForCausalLM(config).eval().requires_grad_(False), "random")


def _once_per_run(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)``, once per run of the suite: the first xdist worker to ask builds it under a
    lock in the run's shared temporary folder, and the other reads it (it would have spent as long
    building its own copy)."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if "PYTEST_XDIST_WORKER" in os.environ else root
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def tiny_target_dir(request, tmp_path_factory):
    """A 4-layer random Llama over the demo target's vocabulary, saved with its tokenizer as a
    Hugging Face directory: ``--target DIR`` for a verb's test that needs its wiring on real
    prompts, not the demo target's acceptance (a forward costs a few percent of the 135M model's)."""

    def build(folder):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        target = request.getfixturevalue("target")  # its tokenizer and vocabulary: loaded by the builder only
        torch.manual_seed(0)
        own = target.model.config
        config = LlamaConfig(vocab_size=own.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                             tie_word_embeddings=False, eos_token_id=own.eos_token_id, bos_token_id=own.bos_token_id)
        model = LlamaForCausalLM(config).eval()
        with torch.no_grad():
            model.lm_head.weight.mul_(12)  # a peaked next-token distribution, as tiny_llama's
        model.save_pretrained(folder)
        target.tokenizer.save_pretrained(folder)

    return _once_per_run(tmp_path_factory, "tiny-target", build)


@pytest.fixture(scope="session")
def tiny_target(tiny_target_dir):
    """``tiny_target_dir`` loaded as a user's model directory is."""
    from simspec.engine.models import load_model

    return load_model(str(tiny_target_dir))


def _tiny_calibration(tmp_path_factory, name: str, target_dir: Path, *sampling: str) -> Path:
    """``calibrate --quick`` of the tiny target with its first two layers drafting: tight-loop curves
    at batch 1 and 2, traces of 8 HumanEval prompts (6 held out). What a shipped demo profile is to
    the validation verbs' tests, in 20 s instead of a calibration of the demo pair (14 min)."""

    def build(folder):
        result = helpers.cli("calibrate", "--gpu", "cpu", "--quick", "--target", target_dir, "--draft",
                             "target-layers:2", "--n-prompts", "8", "--max-new-tokens", "8", "--batch-sizes", "1,2",
                             "--check-prompts", "0", "--engine-prompts", "0", "--threads", str(THREADS), *sampling,
                             "--out", folder)
        assert result.returncode == 0, result.stderr[-3000:]

    return _once_per_run(tmp_path_factory, name, build)


@pytest.fixture(scope="session")
def tiny_profile(tiny_target_dir, tmp_path_factory):
    return _tiny_calibration(tmp_path_factory, "tiny-profile", tiny_target_dir)


@pytest.fixture(scope="session")
def tiny_profile_t1(tiny_target_dir, tmp_path_factory):
    return _tiny_calibration(tmp_path_factory, "tiny-profile-t1", tiny_target_dir, "--temperature", "1")


# --- a tiny real Llama (random weights), for the sampling tests ---------------------------------

@pytest.fixture(scope="session")
def tiny():
    """A 6-layer tiny Llama (``tiny_llama``): deep enough that its first two layers draft
    tokens it finds likely (the sampling tests' power rests on that)."""
    return helpers.tiny_llama(6)


@pytest.fixture(scope="session")
def drafters(tiny):
    return helpers.tiny_drafters(tiny, 2)
