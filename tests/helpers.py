"""Helpers shared by the test modules: synthetic traces and cost models, random numpy policies,
and `simspec` as a user runs it (a subprocess), or in this process for bad input.

numpy only, like the simulator: importing this module must not import torch, transformers or
stable-baselines3 (tests/test_layering.py checks it). Anything that needs torch belongs in a
conftest.py fixture."""

from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import types
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from simspec.policies.features import RESPS_FEATURES, size_feature_dim
from simspec.policies.learned import MLP, LSTMNet, LTDPolicy, RadarPolicy, ReSpSPolicy
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.envs import ltd_sizes, resps_actions
from simspec.sim.traces import NO_NODE, PromptTrace, TraceSet, assemble, pad_node_rows

TINY_VOCAB, TINY_PROMPT = 24, [1, 5, 7, 3, 11]  # the ``tiny`` fixture's vocabulary and prompt
ROOT = Path(__file__).resolve().parents[1]  # the repository: shipped profiles live under calibration/

# --- what the simulator's tests may import ------------------------------------------------------

HEAVY = ("torch", "transformers", "stable_baselines3")
# The simulator's test modules: numpy only, like what they test (their module-level imports are
# checked in a fresh interpreter by tests/test_layering.py, their tests' imports by conftest.py).
NUMPY_ONLY = ("test_baselines.py", "test_envs.py", "test_learned.py", "test_replay.py", "test_traces.py",
              "test_layering.py", "test_sampled_replay.py", "test_load.py", "test_headroom.py")


_HEAVY_SIMSPEC: dict = {"loaded": None, "modules": {}}


def heavy_simspec_modules(heavy: tuple[str, ...] = HEAVY) -> dict[str, str]:
    """Every loaded simspec module whose own imports brought a ``heavy`` package, with that package:
    read from module globals (a module, or an object defined in one), through simspec's modules to
    the package. Kept until another simspec module loads."""
    loaded = {name: m for name, m in list(sys.modules.items()) if name.startswith("simspec") and m is not None}
    if _HEAVY_SIMSPEC["loaded"] == (heavy, len(loaded)):
        return _HEAVY_SIMSPEC["modules"]
    found, edges = {}, {}
    for name, module in loaded.items():
        edges[name] = set()
        for value in vars(module).values():
            origin = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            if not isinstance(origin, str) or origin == name or origin.startswith(f"{name}."):
                continue  # its own, or a package's submodules (loaded by whoever imported them)
            if origin.partition(".")[0] in heavy:
                found.setdefault(name, origin.partition(".")[0])
            elif origin in loaded:
                edges[name].add(origin)
    while True:  # through the simspec modules each imports, to a fixed point
        more = {name: next(found[t] for t in targets if t in found) for name, targets in edges.items()
                if name not in found and any(t in found for t in targets)}
        if not more:
            break
        found.update(more)
    _HEAVY_SIMSPEC.update(loaded=(heavy, len(loaded)), modules=found)
    return found


@contextmanager
def heavy_imports(heavy: tuple[str, ...] = HEAVY):
    """The ``heavy`` packages the code inside imports, as a set filled on exit. It watches the import
    statements and ``importlib.import_module``, not ``sys.modules``: a worker has imported torch
    already, collecting the test modules that need it, and a second import changes nothing there;
    a simspec module loaded before counts for the heavy packages its own imports brought."""
    seen: set[str] = set()
    real_import, real_import_module = builtins.__import__, importlib.import_module
    judged: set[str] = set()  # simspec modules already read (lazy imports repeat on every call)

    def note(name: str) -> None:
        if name.partition(".")[0] in heavy:
            seen.add(name.partition(".")[0])
        elif name.startswith("simspec.") and name not in judged:
            judged.add(name)
            if found := heavy_simspec_modules(heavy).get(name):  # not loaded: its imports run, and are watched
                seen.add(f"{found} (through {name})")

    def watched_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0:
            note(name)
            for item in fromlist or ():  # from a package import a submodule
                if f"{name}.{item}" in sys.modules:
                    note(f"{name}.{item}")
        return real_import(name, globals, locals, fromlist, level)

    def watched_import_module(name, package=None):
        if not name.startswith("."):
            note(name)
        return real_import_module(name, package)

    builtins.__import__, importlib.import_module = watched_import, watched_import_module
    try:
        yield seen
    finally:
        builtins.__import__, importlib.import_module = real_import, real_import_module


# --- statistical tests ---------------------------------------------------------------------------

PASS, FAIL = 1e-3, 1e-6  # a correct law's p-value stays above PASS; a wrong one's falls below FAIL


def g_test(counts: dict, expected: dict, n: int) -> float:
    """G-test of observed counts against exact probabilities; cells expected below 5 pooled."""
    from scipy import stats

    keys = sorted(expected, key=lambda k: -expected[k])
    big = [k for k in keys if expected[k] * n >= 5]
    observed = [counts.get(k, 0) for k in big]
    wanted = [expected[k] * n for k in big]
    rest_obs, rest_exp = n - sum(observed), n - sum(wanted)
    if rest_exp > 1e-9:
        observed.append(rest_obs)
        wanted.append(rest_exp)
    elif rest_obs:  # mass where the target puts none
        return 0.0
    return float(stats.power_divergence(observed, wanted, lambda_="log-likelihood").pvalue)


# --- synthetic traces and costs -----------------------------------------------------------------

DEPTH_MAX = 6


def random_traces(seed: int, n_prompts: int = 7):
    """A width-2 trace set of ``n_prompts`` prompts (3 to 39 positions each) whose greedy paths
    reach a random depth of the full tree; a path node's rank grows with the tree's depth."""
    rng = np.random.default_rng(seed)
    side = np.random.default_rng(seed + 10_000)  # child ranks: their own stream, the rest as before
    levels = DEPTH_MAX - 1
    traces = []
    for _ in range(n_prompts):
        n = int(rng.integers(3, 40))
        ranks = np.full((n, levels, levels), NO_NODE, dtype=np.int16)
        for p in range(n):
            reach = int(rng.integers(0, levels + 1))  # the greedy path's depth in the full tree
            for j in range(1, reach + 1):
                for d in range(j + 1, DEPTH_MAX + 1):
                    ranks[p, j - 1, d - 2] = rng.integers(0, 4) * j + (d - j)  # grows with depth
        # child ranks along the greedy path: mostly the best child, observed until a rank past RANK_CAP
        child = np.where(side.random((n, levels)) < 0.6, 0, side.integers(1, 4, (n, levels))).astype(np.int16)
        ends = side.integers(0, levels + 1, n)
        child[np.arange(levels)[None, :] == ends[:, None]] = NO_NODE
        child[np.arange(levels)[None, :] > ends[:, None]] = -1
        traces.append(PromptTrace(np.zeros(n + 6, dtype=np.int64), 50 + np.arange(n, dtype=np.int32), ranks,
                                  np.zeros((n, levels, 4), np.float16), np.zeros((n, levels, 2), np.float16), False,
                                  child_rank=child))
    return assemble(traces, [50] * n_prompts, {"depth_max": DEPTH_MAX, "width": 2, "prompt_ids": list("abcdefg")})


def sampled_traces(seed: int, n_prompts: int = 5, width: int = 2, nodes: int = 8) -> TraceSet:
    """Traces as recorded at T > 0 (see ``simspec.sim.traces``): per position a tree grown the
    engine's way from random draft log-probs, its ``stored_nodes``, and a random target
    probability for each stored node given its parent (a Dirichlet share of the parent's mass,
    so that siblings never hold more than 1)."""
    from simspec.engine.tree import DraftTree
    from simspec.sim.stochastic import stored_nodes

    rng = np.random.default_rng(seed)
    levels = DEPTH_MAX - 1
    traces = []
    for _ in range(n_prompts):
        n = int(rng.integers(3, 30))
        rows = []
        for _p in range(n):
            tree = DraftTree(0, DEPTH_MAX, width)
            for level in range(levels):
                if level:
                    tree.feed_frontier()
                k = 1 if level == 0 else width
                tree.grow(np.sort(-rng.exponential(1.0, (k, width)), axis=1)[:, ::-1],
                          rng.integers(0, 50, (k, width)))
            kept = stored_nodes(tree.scores[:tree.n], tree.depths[:tree.n], DEPTH_MAX, nodes)
            column = np.full(tree.n, -1)
            column[kept] = np.arange(len(kept))
            parent = np.where(kept == 0, -1, column[tree.parents[kept]])
            prob = np.zeros(len(kept))
            for c in range(len(kept)):
                kids = np.flatnonzero(parent == c)
                prob[kids] = rng.dirichlet(np.full(len(kids) + 1, 0.6))[:-1] if len(kids) else 0
            rows.append((tree.depths[kept], parent, prob, tree.tokens[kept]))
        traces.append(PromptTrace(rng.integers(0, 50, n + 1), 40 + np.arange(n, dtype=np.int32),
                                  np.full((n, levels, levels), NO_NODE, np.int16),
                                  np.zeros((n, levels, width ** 2), np.float16),
                                  np.zeros((n, levels, width), np.float16),
                                  False, **pad_node_rows(rows)))
    return assemble(traces, [40] * n_prompts, {"depth_max": DEPTH_MAX, "width": width, "temperature": 1.0,
                                               "nodes": nodes, "prompt_ids": [f"p{i}" for i in range(n_prompts)]})


def tagged_traces(seed: int, n_prompts: int = 7, traces: TraceSet | None = None) -> TraceSet:
    """``random_traces`` (or ``traces``) with what a profile checks: target ``t``, draft ``d``,
    prompt ids and alternating train / held-out splits (train first)."""
    traces = traces if traces is not None else random_traces(seed, n_prompts)
    n = traces.n_prompts
    traces.meta = traces.meta.with_(target="t", draft="d", prompt_ids=[f"p{i}" for i in range(n)],
                       splits=["train" if i % 2 == 0 else "heldout" for i in range(n)])
    return traces


def synthetic_samples(draft_scale: float = 1.0) -> list[dict]:
    """Latency samples of GPU-like affine curves (verify, draft, greedy) at two or three contexts."""
    from simspec.sim.profile import sample_record

    return ([sample_record("verify", n, c, [0.05 + 2e-3 * n + 1e-5 * c] * 3) for c in (32, 512)
             for n in (1, 4, 8, 16, 64, 128, 256)]
            + [sample_record("draft", n, c, [(0.004 + 3e-4 * n) * draft_scale] * 3) for c in (32, 512)
               for n in (1, 2, 4, 8)]
            + [sample_record("greedy", 1, c, [0.05 + 1e-5 * c] * 3) for c in (32, 128, 512)])


# A rule's decisions per cycle on the 2-core EPYC: 1.5-6.4e-4 s in the shipped CPU profile
RULE_SECONDS = 2e-4


def synthetic_profile(root: Path, traces: TraceSet, name: str = "profile", samples: list[dict] | None = None,
                      **meta) -> str:
    """A measured profile on disk (``root/name``, its traces in ``root/traces-name``). Like a calibrated
    profile it carries each rule family's decision time (``RULE_SECONDS``, flat) unless ``meta`` names
    its own: a family a profile lacks is timed when a verb runs it (a second or more per family)."""
    from simspec.policies.registry import BASELINE_REGISTRY
    from simspec.sim.profile import write_profile
    from simspec.sim.trace_files import save_traces

    if "policy_seconds" not in meta and "policy_seconds_by_depth" not in meta:
        meta["policy_seconds"] = {s.name: RULE_SECONDS for s in BASELINE_REGISTRY.specs() if s.charged_as is None}
    content = save_traces(root / f"traces-{name}", traces)
    write_profile(root / name, {"kind": "measured", "device": "synthetic", "target": traces.meta.target,
                                "draft": traces.meta.draft, **meta,
                                "traces": {"path": f"../traces-{name}", "content_hash": content,
                                           "width": traces.width}}, samples or synthetic_samples())
    return str(root / name)


def cost_model() -> CostModel:
    """Affine curves, GPU-like in shape: verification grows slowly with its size, a draft step is cheap."""
    points = ([Point("verify", n, c, 0.05 + 2e-3 * n + 1e-5 * c) for c in (32, 512) for n in (1, 8, 64)]
              + [Point("draft", n, c, 0.004 + 3e-4 * n) for c in (32, 512) for n in (1, 4, 16)]
              + [Point("greedy", 1, c, 0.05 + 1e-5 * c) for c in (32, 512)]
              + [Point("prefill", n, 0, 0.01 * n) for n in (16, 128)])
    return CostModel(points)


# --- decoding a few prompts on the tiny model -----------------------------------------------------

def tiny_prompts(seed: int, n: int = 3) -> list[list[int]]:
    """``n`` random prompts of 3-11 tokens over the ``tiny`` fixture's vocabulary."""
    rng = np.random.default_rng(seed)
    return [[int(x) for x in rng.integers(0, TINY_VOCAB, size=int(rng.integers(3, 12)))] for _ in range(n)]


def decode_alone_or_batched(target, drafter, policy, prompts: list[list[int]], batch: int, tokens: int = 20):
    """(outputs, plain greedy outputs, every sequence's cycles) of ``policy`` decoding ``prompts``
    one at a time (``batch`` 1) or together on the batched engine (torch imported here only)."""
    from simspec.engine.speculative import SpeculativeEngine

    single = SpeculativeEngine(target, drafter)
    reference = [single.greedy(p, tokens).tokens for p in prompts]
    if batch == 1:
        runs = [single.generate(p, policy, tokens) for p in prompts]
    else:
        runs = SpeculativeEngine(target, drafter, batch_size=batch).decode(prompts, policy, tokens).generations
    return [g.tokens for g in runs], reference, [c for g in runs for c in g.cycles]


# --- learned policies with random networks (numpy inference) ------------------------------------

def random_mlp(sizes: list[int], seed: int) -> MLP:
    rng = np.random.default_rng(seed)
    return MLP(tuple((rng.normal(0, 1.5 / np.sqrt(a), (a, b)).astype(np.float32),
                      rng.normal(0, 0.3, b).astype(np.float32))
                     for a, b in zip(sizes[:-1], sizes[1:])))


def random_lstm(inputs: int, hidden: int, seed: int) -> LSTMNet:
    rng = np.random.default_rng(seed)
    g = lambda *shape: rng.normal(0, 0.8, shape).astype(np.float32)  # noqa: E731
    return LSTMNet(g(4 * hidden, inputs), g(4 * hidden, hidden), g(4 * hidden), g(2, hidden), g(2))


def random_ltd(width: int, depth_max: int, seed: int = 0) -> LTDPolicy:
    sizes = ltd_sizes(2)
    return LTDPolicy(width, depth_max, sizes, random_mlp([width * width + 2, 16, 2], seed),
                     random_mlp([size_feature_dim(width, depth_max), 16, len(sizes)], seed + 1), size=6)


def random_resps(width: int, depth_max: int, hold: int, seed: int = 0) -> ReSpSPolicy:
    actions = resps_actions(width, depth_max)
    return ReSpSPolicy(width, depth_max, actions, random_mlp([RESPS_FEATURES, 16, len(actions)], seed), hold)


def random_radar(width: int, depth_max: int, seed: int = 0) -> RadarPolicy:
    return RadarPolicy(width, depth_max, random_lstm(width + 1, 8, seed), size=6)


# --- the command line ---------------------------------------------------------------------------

# The marks of the test now running, set by conftest.py: `simspec()` refuses to run in a test
# that is not marked `e2e`, so that the marker keeps meaning what it says.
RUNNING: dict[str, set[str]] = {"marks": set()}
THREADS = 2  # set by conftest.py: the cores over the xdist workers


def simspec(*args: str, cwd: Path | str | None = ROOT, timeout: float = 900,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``simspec ARGS`` in a subprocess, from the repository root by default (so that
    ``calibration/cpu-demo`` names the shipped profile), with this worker's share of the cores
    as BLAS/OpenMP threads (verbs that take --threads still default to every core)."""
    if "e2e" not in RUNNING["marks"]:
        raise AssertionError("a test that runs the simspec CLI in a subprocess must be marked e2e")
    full_env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), **(env or {})}
    return subprocess.run([sys.executable, "-m", "simspec.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=full_env)


@contextmanager
def isolated(cwd: Path, tmp: Path | None = None):
    """What a command may change in the process that runs it, set for one run and restored
    after it: the working directory (``cwd``), the temporary directory (``tmp``: $TMPDIR and
    tempfile's cached choice), the environment, the logging setup (emptied, so that the CLI's
    logging.basicConfig writes its warnings to this stderr, as in a process of its own),
    warning filters, the SIGINT handler and torch's thread count."""
    env, before, tempdir = dict(os.environ), os.getcwd(), tempfile.tempdir
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    sigint = signal.getsignal(signal.SIGINT)
    threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
    root.handlers[:] = []
    if tmp is not None:
        os.environ["TMPDIR"] = tempfile.tempdir = str(tmp)
    os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(before)
        tempfile.tempdir = tempdir
        os.environ.clear()
        os.environ.update(env)
        root.handlers[:] = handlers
        root.setLevel(level)
        signal.signal(signal.SIGINT, sigint)
        if threads is not None or "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads or THREADS)


def cli(*args: str, cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """``simspec ARGS`` in this process, through the console script's entry point
    (``simspec.cli.main``), from ``cwd``: its exit status and what it printed (sys.stdout and
    sys.stderr; rich's consoles look them up at every write). For bad input, which fails in
    well under a second where a subprocess would spend one importing."""
    from simspec.cli import main

    out, err = io.StringIO(), io.StringIO()
    with isolated(Path(cwd)), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["simspec", *map(str, args)], code, out.getvalue(), err.getvalue())


def cli_fd(args: list[str], folder: Path, capfd, tmp: Path | None = None) -> subprocess.CompletedProcess:
    """``simspec.cli.main(ARGS)`` as the console script calls it, from ``folder`` with ``tmp`` as
    the temporary directory: its exit status and what reached file descriptors 1 and 2 (pytest's
    ``capfd``), for rows that check what a command wrote to stderr, and that it wrote nothing else."""
    from simspec.cli import main

    capfd.readouterr()  # nothing from before the row
    with isolated(folder, tmp=tmp), pytest.raises(SystemExit) as exit:
        main(args)
    captured = capfd.readouterr()
    code = exit.value.code
    return subprocess.CompletedProcess(["simspec", *args], code if isinstance(code, int) else 1, captured.out,
                                       captured.err)


def simulated_rows(root: Path, baseline: str) -> list[dict]:
    """``validate --simulated --baselines grid,BASELINE --json`` on a small synthetic profile
    whose decision-time table holds the baseline (so nothing is timed now): the report's rows,
    after checking the command succeeded."""
    profile = synthetic_profile(root, tagged_traces(4), policy_seconds={"static": 1e-6, baseline: 1e-6})
    result = cli("validate", "--simulated", "--profile", profile, "--baselines", f"grid,{baseline}", "--json")
    assert result.returncode == 0, result.stderr
    return last_json(result)["rows"]


def last_json(result: subprocess.CompletedProcess) -> dict:
    """The ``--json`` summary: the last line of stdout."""
    return json.loads(result.stdout.strip().splitlines()[-1])


# Transformers' config and model classes of the tiny targets: the families an EAGLE-3 head is
# trained for, beside Llama. Each gets the same shapes (head_dim 16 where a family sets its own).
TINY_ARCHITECTURES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}),
}


def tiny_llama(layers: int):
    """A Llama with random weights over TINY_VOCAB tokens; its head scaled so that the next
    token is predictable (top token ~0.5-0.8), as a language model's often is."""
    return tiny_model("llama", layers)


def tiny_model(architecture: str, layers: int, **overrides):
    """``tiny_llama``'s shapes in another family of ``TINY_ARCHITECTURES`` (``overrides``: its
    config's fields, e.g. a sliding window)."""
    import torch
    import transformers

    from simspec.engine.models import LoadedModel, ModelSource

    if "model" not in RUNNING.get("marks", {"model"}):
        raise AssertionError("this test runs a language model (a tiny one): mark it `model`, out of the fast lane")
    config_class, model_class, own = TINY_ARCHITECTURES[architecture]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(
        vocab_size=TINY_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, eos_token_id=None,
        bos_token_id=None, pad_token_id=None, tie_word_embeddings=False, **{**own, **overrides})
    model = getattr(transformers, model_class)(config).eval().requires_grad_(False)
    with torch.no_grad():
        model.lm_head.weight.mul_(12)
    return LoadedModel(ModelSource(f"tiny-{architecture}", Path(".")), model, None)


def tiny_drafters(target, lm_layers: int) -> dict:
    """A random EAGLE-3 head in the public layout over 12 of the 24 tokens (d2t), and the
    target's first ``lm_layers`` layers as a draft LM."""
    import torch

    from simspec.engine.drafter import CausalLMDrafter, truncated_target
    from simspec.engine.eagle import EagleDrafter
    from simspec.engine.eagle_public import Eagle3Head, eagle3_for_target

    torch.manual_seed(1)
    head = Eagle3Head(eagle3_for_target(target, 12))
    kept = torch.randperm(TINY_VOCAB)[:12].sort().values
    head.d2t.copy_(kept - torch.arange(12))
    return {"eagle3": EagleDrafter(head, head.target_ids(), target, "eagle3"),
            "lm": CausalLMDrafter(truncated_target(target, lm_layers), "lm")}


def killed_in_batch(k: int):
    """A progress tick that interrupts its run (KeyboardInterrupt, as SIGINT does) as the ``k``-th
    batch ends, before the run records it: the long jobs that resume (text store, teacher pass)."""
    ticks = []

    def tick(n=1, **_):
        ticks.append(n)
        if len(ticks) == k:
            raise KeyboardInterrupt

    return tick
