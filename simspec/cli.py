"""The ``simspec`` command: the only place that parses flags or prints for a person.

Each verb builds a request (a frozen dataclass owned by the module that does the work), hands
it progress callbacks, and renders the summary it gets back; ``main`` maps every error to one
line on stderr (exit 2) and an interrupt to ``simspec: interrupted`` (exit 130)."""

import logging
import sys
from typing import Annotated, Optional

import typer

from simspec import __version__
from simspec.engine.formats import draft_help
from simspec.errors import SimspecError
from simspec.policies.algorithms import algo_names, algos_help
from simspec.policies.registry import baselines_help, default_baselines
from simspec.report import console as show
from simspec.report.console import err, json_line as _json, out, run_with_progress as _run

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="simspec: calibrate speculative decoding once, simulate it fast, train tree policies, validate on real models.",
)
plot_app = typer.Typer(no_args_is_help=True, help="Draw figures from profiles and runs into figures/.")
app.add_typer(plot_app, name="plot")

# --- options shared by several verbs, declared once ------------------------------------------
TARGET_HELP = "Target: a built-in name (smollm2-135m-instruct), a Hugging Face model directory, or a .gguf file."
DRAFT_HELP = draft_help()
PROMPTS_HELP = ("Prompt set: humaneval, sharegpt, a JSONL file with a 'prompt' string or 'turns' list per line, or a mix "
                "taken in turn, e.g. humaneval+sharegpt.")
Target = Annotated[str, typer.Option(help=TARGET_HELP)]
Draft = Annotated[str, typer.Option(help=DRAFT_HELP)]
Prompts = Annotated[str, typer.Option(help=PROMPTS_HELP)]
Split = Annotated[str, typer.Option(help="Prompts: heldout, train or all.")]
Device = Annotated[str, typer.Option(help="auto, cpu or cuda.")]
DType = Annotated[str, typer.Option(help="fp32, bf16 or fp16: target and drafter weights and activations (lossless "
                                    "means equal to plain decoding in the same dtype; bf16 is native on AMX CPUs).")]
Threads = Annotated[Optional[int], typer.Option(help="torch CPU threads (default: all cores).")]
Temperature = Annotated[float, typer.Option(help="0: greedy decoding (outputs checked token for token). Above 0: "
                                            "speculative sampling from softmax(logits / T), outputs checked by a "
                                            "KS test of their probability integral transform under the target.")]
TopP = Annotated[float, typer.Option(help="Nucleus sampling: keep the likeliest tokens up to this mass (T > 0 only).")]
Seed = Annotated[int, typer.Option(help="Sampling seed (T > 0): pass k, prompt i draw from seed + k * prompts + i.")]
ProfileThreads = Annotated[Optional[int], typer.Option("--threads", help="torch CPU threads (default: the profile's).")]
Json = Annotated[bool, typer.Option("--json", help="End stdout with one JSON line of the results.")]
Force = Annotated[bool, typer.Option(help="Replace an existing --out.")]
AllowOtherDevice = Annotated[bool, typer.Option(help="Use a profile measured on another device model (CPU or GPU) "
                                                "than this one, with a warning, instead of refusing it.")]
Profile = Annotated[str, typer.Option(help="A profile folder with traces (calibration/NAME).")]


def Out(what: str):  # noqa: N802 (a type alias whose help names the verb's default)
    return Annotated[Optional[str], typer.Option("--out", help=f"{what}; refused if it exists, unless --force.")]


def MaxNewTokens(minimum: int, help: str = "New tokens per prompt."):  # noqa: N802
    return Annotated[int, typer.Option("--max-new-tokens", min=minimum, help=help)]


def NPrompts(help: str):  # noqa: N802
    return Annotated[int, typer.Option("--n-prompts", min=1, help=help)]


# --- helpers ---------------------------------------------------------------------------------
def _int_list(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SimspecError(f"{flag} takes comma-separated integers, got {text!r}") from None
    if not values:
        raise SimspecError(f"{flag} is empty")
    bad = [v for v in values if v < 1]
    if bad:
        letter = {"--depths": "D", "--widths": "W", "--sizes": "V"}.get(flag, flag)
        raise SimspecError(f"{flag}: {letter} must be >= 1, got {bad[0]}")
    return values


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _version_callback(value: bool) -> None:
    if value:
        out.print(f"simspec {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what simspec does."),
) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


# --- real engine -----------------------------------------------------------------------------
@app.command("bench-engine")
def bench_engine(
    target: Target = "smollm2-135m-instruct",
    draft: Draft = "eagle",
    prompts: Prompts = "humaneval",
    split: Split = "heldout",
    n_prompts: NPrompts("How many prompts (first N of the split).") = 3,
    offset: int = typer.Option(0, min=0, help="Skip this many prompts of the split first (to run a long grid in chunks)."),
    max_new_tokens: MaxNewTokens(1, "Tokens to generate per prompt.") = 48,
    depths: str = typer.Option("1,3,5", help="Tree depths D (levels, root included; D-1 draft steps)."),
    widths: str = typer.Option("1,4", help="Beam widths W (top-k per expanded node)."),
    sizes: str = typer.Option("6,12", help="Verified nodes V (root included): the target's tokens per forward; "
                              "capped at the tree's node count."),
    repeats: int = typer.Option(1, min=1, help="Passes over the prompt set (speedup per prompt = median over passes)."),
    device: Device = "auto",
    dtype: DType = "fp32",
    temperature: Temperature = 0.0,
    top_p: TopP = 1.0,
    seed: Seed = 0,
    threads: Threads = None,
    as_json: Json = False,
) -> None:
    """Real engine: every static (D, W, V) tree vs plain decoding on the same prompts,
    interleaved; median speedup, acceptance length tau, time shares, and a lossless check
    (greedy: token for token; --temperature > 0: a KS test of the outputs' PIT)."""
    from simspec.measure.bench import BenchRequest, bench_engine as run, capped_note

    grid = _int_list(depths, "--depths"), _int_list(widths, "--widths"), _int_list(sizes, "--sizes")
    request = BenchRequest(target, draft, prompts, split, n_prompts, offset, max_new_tokens, *grid, repeats, device,
                           dtype, temperature, top_p, seed)
    checked = request.check()
    summary = _run(lambda bar, status: run(request, bar, status, checked), threads)
    show.bench_engine(summary)
    if capped_note(*grid):
        show.note(capped_note(*grid))
    _json(as_json, summary)


@app.command("latency")
def latency(
    target: Target = "smollm2-135m-instruct",
    draft: Draft = "eagle",
    sizes: str = typer.Option("1,2,4,8,12,16,24,32,48,64,96,128", help="Target forward sizes V (tokens)."),
    contexts: str = typer.Option("64,256,1024", help="Context lengths L already in the KV cache."),
    widths: str = typer.Option("1,2,4,6,8,10", help="Draft step widths W (frontier nodes expanded)."),
    repeats: int = typer.Option(7, min=3, help="Timed repeats per point (after 2 warm-up calls)."),
    device: Device = "auto",
    dtype: DType = "fp32",
    threads: Threads = None,
    as_json: Annotated[bool, typer.Option("--json", help="End stdout with one JSON line of every sample.")] = False,
) -> None:
    """Latency tables: one target forward vs V and L, one draft step vs W and L (median, IQR),
    and plain decoding's ms/token beside its memory floor (weight bytes / measured bandwidth)."""
    grid = _int_list(sizes, "--sizes"), _int_list(contexts, "--contexts"), _int_list(widths, "--widths")
    from simspec.engine.models import resolve_dtype
    from simspec.measure.profiler import LatencyRequest, measure_latency  # torch: after the flags are checked

    resolve_dtype(dtype)
    request = LatencyRequest(target, draft, *grid, repeats, device, dtype)
    summary = _run(lambda bar, status: measure_latency(request, bar, status), threads)
    show.latency(summary, request.contexts)
    _json(as_json, summary)


@app.command("train-draft")
def train_draft(
    kind: str = typer.Option("eagle3", help="eagle3: an EAGLE-3 head in the public layout SGLang and vLLM load "
                             "(three fused target layers, its own LM head, training-time test); eagle: simspec's "
                             "EAGLE-1-style head; lm: a small standalone Llama sharing the target's tokenizer."),
    target: Target = "smollm2-135m-instruct",
    data: str = typer.Option("self:0.55,selfcode:0.15,sharegpt:0.15,code:0.15", help="Teacher text, NAME[:SHARE] "
                             "comma-separated: self (the target's greedy continuations of train-split ShareGPT and "
                             "HumanEval prompts), selfcode (its continuations of stdlib function stubs), sharegpt "
                             "(train-split conversations), code (Python stdlib source). No shares: even split."),
    tokens: int = typer.Option(480_000, min=256, help="Teacher tokens in total."),
    epochs: int = typer.Option(4, min=1, help="Passes over the teacher corpus."),
    draft_vocab: int = typer.Option(8192, "--draft-vocab", min=16, help="Reduced draft vocabulary (most frequent target tokens)."),
    unroll: int = typer.Option(2, min=1, max=4, help="eagle: training passes feeding the head's own features back (1 = EAGLE-1)."),
    ttt_steps: int = typer.Option(4, "--ttt-steps", min=1, max=8, help="eagle3: training-time test steps (the head "
                                  "unrolled on its own outputs; step k's loss weighs 0.8^k)."),
    feature_weight: float = typer.Option(1.0, "--feature-weight", min=0.0, help="eagle: weight of the feature-regression loss (0 = token loss only)."),
    hidden: int = typer.Option(256, min=16, help="lm: hidden size."),
    layers: int = typer.Option(2, min=1, help="lm: decoder layers."),
    lr: float = typer.Option(1e-3, help="Peak learning rate (AdamW, warm-up then cosine)."),
    seed: int = typer.Option(0, help="Seed for data order, initialisation and sampling."),
    labels: str = typer.Option("soft", help="eagle3: soft (cross-entropy against the target's distribution over "
                               "the draft vocabulary, EAGLE's loss) or hard (against its greedy token)."),
    init: Optional[str] = typer.Option(None, "--init", help="eagle3: continue training this head (its weights "
                                        "and draft vocabulary) on the corpus; its card is kept as provenance. A "
                                        "--draft-vocab above the head's grows its vocabulary by the corpus's most "
                                        "frequent other tokens, their rows starting as the target's."),
    intermediate: Optional[int] = typer.Option(None, "--intermediate-size", min=16, help="eagle3: the head's MLP "
                                               "width (default the target's). With --init, a larger one widens the "
                                               "head: its units kept, the new ones starting with no effect."),
    cut_at_eos: bool = typer.Option(True, "--cut-at-eos/--no-cut-at-eos", help="End self-distilled text at its "
                                    "first end-of-sequence token, where decoding stops (--no-cut-at-eos: the corpus "
                                    "of heads trained before the cut, e.g. the shipped head's first stage)."),
    dtype: DType = "fp32",
    out_path: Out("Output directory (default real/drafters/KIND)") = None,
    force: Force = False,
    threads: Threads = None,
    as_json: Json = False,
) -> None:
    """Train a drafter for TARGET on teacher data it labels itself; resumable (a stopped run
    continues from OUT.partial/), deterministic from --seed."""
    from simspec.distill.run import TrainDraftRequest, train_draft as run

    request = TrainDraftRequest(kind=kind, target=target, data=_names(data), tokens=tokens, epochs=epochs,
                                draft_vocab=draft_vocab, unroll=unroll, ttt_steps=ttt_steps,
                                feature_weight=feature_weight, hidden=hidden, layers=layers, lr=lr, seed=seed,
                                dtype=dtype, out=out_path, force=force, labels=labels,
                                init=init, intermediate=intermediate, cut_at_eos=cut_at_eos)
    request.check()
    s = _run(lambda bar, status: run(request, bar, status), threads)
    show.train_draft(s)
    _json(as_json, s)


@app.command("drafter-card")
def drafter_card(
    draft: str = typer.Option("eagle", help="A shipped drafter name or a drafter directory (simspec or EAGLE)."),
    target: Target = "smollm2-135m-instruct",
    n_prompts: NPrompts("Held-out prompts per source for agreement and acceptance.") = 8,
    max_new_tokens: MaxNewTokens(1) = 64,
    dtype: DType = "fp32",
    out: Optional[str] = typer.Option(None, help="Folder for the card (README.md + measured.json); default: the "
                                                   "drafter's own folder. Use it for a second card (another dtype or "
                                                   "machine) that must not replace the drafter's."),
    threads: Threads = None,
    as_json: Json = False,
) -> None:
    """Measure a trained drafter (held-out agreement with the target's greedy token, draft-step
    latency vs W, acceptance per depth on held-out HumanEval and ShareGPT prompts) and write its
    model card (README.md + measured.json)."""
    from simspec.distill.card import CardRequest, make_card

    request = CardRequest(draft, target, n_prompts, max_new_tokens, dtype, out)
    request.check()
    summary = _run(lambda bar, status: make_card(request, status), threads)
    show.drafter_card(summary)
    _json(as_json, summary)


# --- calibration -----------------------------------------------------------------------------
@app.command()
def calibrate(
    gpu: str = typer.Option("auto", help="auto (the device present), cpu, or a GPU name: a100, h100, h200, a40, l4, "
                            "rtx3090, rtx4090, v100. A named GPU that torch does not see gets an ANALYTIC "
                            "roofline profile, marked as such everywhere."),
    target: Annotated[str, typer.Option(help=TARGET_HELP + " Analytic only: arch:llama-3.1-8b.")] = "smollm2-135m-instruct",
    draft: Draft = "eagle",
    prompts: Prompts = "humaneval",
    n_prompts: NPrompts("Prompts to record (first N; both splits, each trace remembers its split).") = 164,
    max_new_tokens: MaxNewTokens(2, "Greedy tokens per prompt.") = 128,
    depth_max: int = typer.Option(12, "--depth-max", min=2, max=32, help="Tree levels recorded (root included)."),
    width: int = typer.Option(10, min=1, max=32, help="Beam width W of the recorded trees."),
    traces_from: Optional[str] = typer.Option(None, "--traces-from", help="Reuse traces (a traces folder or a "
                                              "profile with traces; same models) instead of recording them."),
    no_traces: bool = typer.Option(False, "--no-traces", help="Latency curves only."),
    traces_only: bool = typer.Option(False, "--traces-only", help="Record traces only, into --out (a traces folder "
                                     "that profiles then name with --traces-from). No timing: may share the machine."),
    check_prompts: int = typer.Option(4, "--check-prompts", min=0, help="Prompts for the replay check (live engine "
                                      "vs trace, per cycle)."),
    check_tokens: int = typer.Option(48, "--check-tokens", min=2, help="New tokens per replay-check run."),
    quick: bool = typer.Option(False, help="A small latency grid (tests, demo)."),
    out_path: Out("Profile folder (default calibration/GPU-DRAFT; with --traces-only "
                  "calibration/traces-PROMPTS-DRAFT)") = None,
    force: Force = False,
    threads: Threads = None,
    seed: int = typer.Option(0, help="Seed (context token ids of the latency runs; at T > 0 prompt n's "
                             "continuation is sampled with seed + n)."),
    dtype: DType = "fp32",
    temperature: float = typer.Option(0.0, min=0.0, help="0: greedy traces. Above 0: sampled continuations, and "
                                      "per tree the target's probability of every node a cycle of V <= --nodes may "
                                      "verify: the simulator then draws (or takes the expectation of) acceptance."),
    top_p: TopP = 1.0,
    nodes: int = typer.Option(64, min=2, help="T > 0: the largest V (root included) the traces support; recording "
                              "costs one target forward over about this many nodes per position."),
    ray: Annotated[Optional[str], typer.Option("--ray", help="Record the traces as Ray tasks: 'local' (a Ray "
                                               "instance on this machine) or a cluster's ADDRESS (host:port). The "
                                               "merged traces equal a single-process recording's (same content "
                                               "hash). Needs pip install \"simspec[ray]\".")] = None,
    import_curves: Annotated[Optional[str], typer.Option("--import-curves", help="Build the profile from latency "
                                                         "curves measured in another engine (the server you deploy: "
                                                         "JSON or CSV, schema in docs/calibration.md), paired with "
                                                         "--traces-from; no models are loaded. The profile is marked "
                                                         "IMPORTED and cannot be validated with simspec's engine.")] = None,
    batch_sizes: str = typer.Option("1", "--batch-sizes", help="Also measure (or model) the verify, draft and "
                                    "plain-step curves for batches of these sizes, e.g. 1,2,4,8, so that `simspec "
                                    "tune --batch-size B` can answer for a server batching B sequences."),
    workers: int = typer.Option(2, min=1, help="--ray: shards (tasks) to split the prompts into; each task runs "
                                "--threads torch threads and asks Ray for that many CPUs (and one GPU where the "
                                "cluster has them)."),
    as_json: Json = False,
) -> None:
    """Measure latency curves (or model them for an absent GPU), fit the cost model, and record
    draft-tree traces into one profile folder: everything the simulator needs."""
    from simspec.measure.calibrate import CalibrateRequest, calibrate as run

    request = CalibrateRequest(gpu, target, draft, prompts, n_prompts, max_new_tokens, depth_max, width, traces_from,
                               no_traces, traces_only, check_prompts, check_tokens, quick, out_path, force, seed,
                               dtype, temperature, top_p, nodes, ray, workers, import_curves,
                               tuple(_ints(batch_sizes, "--batch-sizes")))
    plan = request.check()
    if plan.kind == "analytic":
        show.warn(f"no {plan.gpu.upper()} here: building an ANALYTIC roofline profile from public device specs "
                  "and the model architecture. It is a model, not a measurement.")
    s = _run(lambda bar, status: run(request, bar, status, plan), threads)
    show.calibrate(s)
    _json(as_json, s)


@app.command()
def recalibrate(
    profile: Annotated[str, typer.Option(help="A measured profile with traces (calibration/NAME).")],
    n_prompts: NPrompts("Train-split prompts of the profile's dataset to run (never held-out ones).") = 8,
    max_new_tokens: MaxNewTokens(4, "New tokens per run.") = 48,
    out_path: Out("The refitted profile (default: PROFILE-insitu beside it)") = None,
    force: Force = False,
    allow_other_device: AllowOtherDevice = False,
    threads: ProfileThreads = None,
    as_json: Json = False,
) -> None:
    """Refit a measured profile's latency curves in situ: run plain greedy decoding and a ladder
    of static trees (V = 2..128) on the live engine, on train prompts, and scale each curve to the
    engine's own cycle timings (per verified size for verify and bookkeeping, per context for
    the plain step). Calibration's tight loops miss what a forward costs inside the decoding
    loop; this profile predicts the real engine. Takes ~5 minutes on a 2-core CPU at the
    defaults. Writes a new profile that names the one it refits."""
    from simspec.measure.insitu import RecalibrateRequest, recalibrate as run

    request = RecalibrateRequest(profile, out_path, n_prompts, max_new_tokens, force, allow_other_device)
    checked = request.check()
    s = _run(lambda bar, status: run(request, bar, status, checked), threads or checked[0].meta.get("threads"))
    show.recalibrate(s)
    _json(as_json, s)


# --- validation and training -----------------------------------------------------------------
@app.command()
def validate(
    profile: Profile,
    simulated: bool = typer.Option(False, "--simulated", help="Replay the profile's traces (fast, no models)."),
    real: bool = typer.Option(False, "--real", help="Run every method on the real engine, interleaved with plain "
                              "greedy decoding, next to the simulator's prediction for the same prompts."),
    baselines: str = typer.Option(",".join(default_baselines()), help=baselines_help()),
    drafters: str = typer.Option("", help="--simulated with the select baseline: comma-separated profiles of other "
                                 "drafters of the same target, their traces recorded on the same prompts."),
    policies: str = typer.Option("", help="Comma-separated learned policy folders (policies/NAME), scored beside "
                                 "the baselines; each is charged its measured decision time."),
    split: Annotated[str, typer.Option(help="Prompts scored: heldout, train or all.")] = "heldout",
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", min=2,
                                                 help="Token budget per prompt (simulated default: everything "
                                                 "recorded; real default: 48)."),
    prompts: Annotated[str, typer.Option(help="--real: " + PROMPTS_HELP)] = "humaneval",
    n_prompts: NPrompts("--real: prompts to run (first N of the split).") = 40,
    repeats: int = typer.Option(1, min=1, help="--real: passes over the prompts (per-prompt speedup: median over "
                                "passes; at T > 0 each pass is another seed, and the mean is taken)."),
    recalibrate: bool = typer.Option(False, "--recalibrate", help="--real: first refit the profile in situ (as "
                                     "`simspec recalibrate` does) on train-split prompts of --prompts, in this "
                                     "process right before the scored runs, and predict with that refit (saved in "
                                     "RUN/profile/). Adds ~4 minutes on a 2-core CPU."),
    recalibrate_prompts: int = typer.Option(8, min=1, help="--recalibrate: train-split prompts to refit on."),
    allow_other_device: AllowOtherDevice = False,
    temperature: Optional[float] = typer.Option(None, min=0.0, help="The temperature the profile's traces were "
                                                "recorded at (default: the profile's; another is refused). At T > 0 "
                                                "--real samples: each pass is one seed per prompt, speedups and tau "
                                                "are means over seeds, outputs are checked by a KS test of their "
                                                "PIT."),
    seed: Seed = 0,
    out_dir: Out("--real: run folder (default real/validate-PROFILE-PROMPTS)") = None,
    force: Force = False,
    threads: ProfileThreads = None,
    as_json: Json = False,
) -> None:
    """Score baselines and learned policies against plain decoding (greedy, or sampling at the
    profile's temperature). --simulated: replay
    the profile's held-out traces, next to the hindsight oracle (seconds). --real: run them on
    the real models and report real and simulated speedups side by side, paired tests against
    EAGLE-3's default tree and the grid best, latency drift, and a lossless check; writes
    real/RUN/ (report.json, report.md, figures)."""
    from simspec.sim.evaluate import parse_names

    if real == simulated:
        raise SimspecError("choose one of --simulated (replay, seconds) or --real (the real engine)")
    names, paths = tuple(parse_names(baselines)), _names(policies)
    if real and drafters:
        raise SimspecError("--drafters is read by validate --simulated (the select baseline) only")
    if real:
        from simspec.measure.validate import ValidateRequest, validate_real
        from simspec.report.validation import summary_line

        request = ValidateRequest(profile, names, paths, prompts, split, n_prompts, max_new_tokens or 48, repeats,
                                  out_dir, force, recalibrate, recalibrate_prompts, allow_other_device, temperature,
                                  seed)
        checked = request.check()
        report, run_dir = _run(lambda bar, status: validate_real(request, bar, status, checked),
                               threads or checked[0].meta.get("threads"))
        show.validate_real(report, run_dir)
        return _json(as_json, summary_line(report, str(run_dir)))
    from simspec.sim.run import SimulatedRequest, validate_simulated

    result = validate_simulated(SimulatedRequest(profile, names, paths, split, max_new_tokens, temperature,
                                                 _names(drafters)), err.status)
    show.validate_simulated(result)
    _json(as_json, result.summary)


@app.command()
def train(
    profile: Profile,
    algo: Annotated[str, typer.Option(help=algos_help())],
    simulated: bool = typer.Option(False, "--simulated", help="Train against the profile's replay (the only mode)."),
    preset: str = typer.Option("paper", help="paper: the seed's networks, hyper-parameters and step counts; "
                               "fast: the same networks with about a tenth of the steps (minutes)."),
    reward: str = typer.Option("throughput", help="throughput (tokens per second of each cycle, LTD's), "
                               "acceptance (tokens per cycle, the proxy) or time (seconds saved over greedy)."),
    variant: str = typer.Option("standard", help="Re-SpS only: standard or maxent (entropy coefficient 0.1)."),
    ablate: Annotated[Optional[str], typer.Option(help="LTD only, the paper's ablations: size (no size policy: the "
                                                  "best static V every cycle), depth (no depth policy: the best "
                                                  "static depth) or rounds (no co-adaptation rounds).")] = None,
    hold: Annotated[Optional[int], typer.Option(help="Re-SpS only: cycles the deployed policy holds an action (the "
                                                "paper's N, 30 by default).")] = None,
    train_hold: Annotated[Optional[int], typer.Option(help="Re-SpS only: cycles an action is held in training (10 "
                                                      "by default).")] = None,
    seed: int = typer.Option(0, help="Seeds the networks, the environments and the sampling: same seed, same policy."),
    out_dir: Out("Policy folder (default policies/ALGO-PROFILE[-PRESET])") = None,
    force: Force = False,
    precision: str = typer.Option("auto", help="PPO's hidden layers: fp32, or bf16 (autocast; weights, heads, "
                                  "losses, Adam and the exported policy stay fp32). auto: bf16 for ltd where the "
                                  "CPU has native bf16 (twice as fast), else fp32."),
    threads: Annotated[Optional[int], typer.Option(help="Torch threads (default: every core).")] = None,
    as_json: Json = False,
) -> None:
    """Train a tree policy in the simulator, in minutes on a CPU. Learns on the profile's
    training prompts (a fifth of them held back to pick the best checkpoint), measures the
    policy's decision time here, scores it on the held-out prompts against EAGLE-3's default
    tree, the best static tree and the hindsight oracle, and writes policies/NAME/: the
    exported inference networks, the SB3/torch checkpoints, metadata, training.csv and
    TensorBoard logs (tb/)."""
    from simspec.train.run import TrainRequest, total_work, train_policy

    if not simulated:
        raise SimspecError("training runs in the simulator: pass --simulated")
    request = TrainRequest(profile, algo, preset, reward, seed, out_dir, variant, force, precision, ablate, hold,
                           train_hold)
    request.check()
    s = _run(lambda bar, status: train_policy(request, bar(f"train {algo} ({preset})", total_work(request))), threads)
    show.train(s, request)
    _json(as_json, s)


@app.command()
def sweep(
    profile: Profile,
    algo: Annotated[str, typer.Option(help=f"Comma-separated algorithms: {', '.join(algo_names())}.")],
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds, e.g. 1,2,3.")] = "0",
    reward: Annotated[str, typer.Option(help="Comma-separated rewards: throughput, acceptance, time.")] = "throughput",
    preset: str = typer.Option("fast", help="Every trial's schedule: paper or fast."),
    ray: Annotated[Optional[str], typer.Option("--ray", help="Run the trials as Ray Tune trials: 'local' (a Ray "
                                               "instance on this machine) or a cluster's ADDRESS. Without it they "
                                               "run one after another in this process. Needs pip install "
                                               "\"simspec[ray]\".")] = None,
    workers: int = typer.Option(2, min=1, help="--ray local: trials at once."),
    threads: int = typer.Option(1, min=1, help="torch threads of every trial, with or without Ray (a seed gives "
                                "the same policy at the same thread count); under Ray, the CPUs a trial asks for."),
    out_dir: Out("Sweep folder (default policies/sweep-PROFILE): one policy folder per trial and sweep.json") = None,
    force: Force = False,
    as_json: Json = False,
) -> None:
    """Train every combination of --algo x --reward x --seeds on one profile (each trial is
    `simspec train --simulated`), one after another or as Ray Tune trials, and print the
    held-out speedup per configuration: mean and sd over seeds, beside the grid best."""
    from simspec.train.sweep import SweepRequest, run

    request = SweepRequest(profile, _names(algo), tuple(_ints(seeds, "--seeds")), _names(reward), preset, ray, workers,
                           threads, out_dir, force)
    request.check()
    s = _run(lambda bar, status: run(request, bar, status), threads)
    show.sweep(s)
    _json(as_json, s)


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(v) for v in _names(text)]
    except ValueError:
        raise SimspecError(f"{flag} takes comma-separated integers, got {text!r}") from None


@app.command()
def demo(
    out_dir: Annotated[str, typer.Option("--out", help="Folder for everything the demo makes; refused if it exists, "
                                         "unless --force.")] = "demo",
    algos: str = typer.Option("ltd,radar", help=f"Policies to train (preset fast): {', '.join(algo_names())}."),
    n_prompts: NPrompts("Held-out HumanEval prompts of the real validation.") = 8,
    max_new_tokens: MaxNewTokens(4, "New tokens per prompt in the real validation.") = 32,
    force: Force = False,
) -> None:
    """The whole loop on the shipped defaults, in about 10 minutes on a 2-core CPU: a small
    calibration of this machine (quick latency grid; the shipped HumanEval draft-tree traces,
    which do not depend on the hardware), `fast` training of LTD and RADAR against it, a short
    real validation (the learned policies, EAGLE-3's default tree, the grid best and
    GammaTune, interleaved with plain greedy decoding), the figures, and a summary. Each step
    is an ordinary simspec command, printed before it runs."""
    from simspec.demo import DemoRequest, run_demo

    show.demo(run_demo(DemoRequest(out_dir, _names(algos), n_prompts, max_new_tokens, force), _invoke, show.demo_step))


def _invoke(args: list[str]) -> None:
    """Runs one simspec command in this process (a demo step); its interrupt stays an interrupt."""
    code = app(args=args, standalone_mode=False)
    if code == 130:
        raise KeyboardInterrupt
    if code:
        raise typer.Exit(code)


@app.command("bench-sim")
def bench_sim(
    profile: Annotated[str, typer.Option(help="A profile folder with traces.")],
    copies: int = typer.Option(200, min=1, help="Copies of every trace prompt replayed at once."),
    depth: int = typer.Option(8, min=1, help="Static tree depth D."),
    size: int = typer.Option(60, min=1, help="Static verified tokens V."),
    repeats: int = typer.Option(3, min=1, help="Timed replays (median reported)."),
    temperature: Optional[float] = typer.Option(None, min=0.0, help="The temperature the profile's traces must "
                                                "have been recorded at (default: the profile's). At T > 0 every "
                                                "cycle draws its accepted length from the tree's distribution."),
    as_json: Json = False,
) -> None:
    """Replay throughput of the simulator: cycles per second for a static policy over
    COPIES copies of the profile's traces, on one core."""
    from simspec.sim.run import BenchSimRequest, bench_sim as run

    s, n_prompts = run(BenchSimRequest(profile, copies, depth, size, repeats, temperature))
    show.bench_sim(s, n_prompts, repeats)
    _json(as_json, s)


@app.command()
def tune(
    profile: Annotated[str, typer.Option(help="A profile folder with traces (measured, analytic or imported).")],
    engine: Annotated[str, typer.Option(help="Print the tree in this engine's settings: sglang (--speculative-* "
                                        "flags), vllm (speculative_config; vLLM's EAGLE drafts a chain), eagle "
                                        "(EaModel.from_pretrained arguments) or json (simspec's D, W, V).")] = "json",
    draft_path: Annotated[Optional[str], typer.Option("--draft-path", help="The draft model path the printed "
                                                      "settings name (default: the profile's draft).")] = None,
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", min=2, help="Token budget per prompt "
                                                 "(default: everything recorded)."),
    batch_size: int = typer.Option(1, "--batch-size", min=1, help="Sequences the server batches: each cycle's "
                                   "draft and verify time is shared by them (the profile needs curves at that "
                                   "batch size: `simspec calibrate --batch-sizes`)."),
    as_json: Json = False,
) -> None:
    """The best static tree for a profile, in the settings of the engine you deploy: every static
    (D, V) replayed on the profile's train prompts, the best and the runner-up scored on its
    held-out prompts (speedup and margin), and the best tree per context band where it differs.
    Conventions: simspec's D counts tree levels with the root and V verified tokens with the
    root; SGLang's num-steps is D - 1, EAGLE's depth D - 2, vLLM's num_speculative_tokens D - 1."""
    from simspec.sim.tune import TuneRequest, run

    tuned = run(TuneRequest(profile, engine, max_new_tokens, draft_path, batch_size))
    show.tune(tuned)
    _json(as_json, tuned.summary)


# --- figures ---------------------------------------------------------------------------------
FigureOut = Annotated[str, typer.Option("--out", help="Folder for the figure.")]


@plot_app.command("curves")
def plot_curves_command(
    profile: Annotated[str, typer.Option(help="A profile folder (calibration/NAME).")],
    out_dir: FigureOut = "figures",
) -> None:
    """Draft time vs depth and verify time vs V (LTD Figure 2, left): the profile's
    measurements with the fitted cost model drawn over them."""
    from simspec.report.figures import curves

    path, analytic = curves(profile, out_dir)
    if analytic:
        show.warn("this profile is ANALYTIC (a roofline model, not a measurement); the figure says so")
    out.print(f"figure written to {path}")


@plot_app.command("surface")
def plot_surface_command(
    profile: Annotated[str, typer.Option(help="A profile folder with traces.")],
    split: Split = "heldout",
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", min=2,
                                                 help="Token budget per prompt (default: everything recorded)."),
    out_dir: FigureOut = "figures",
) -> None:
    """Simulated speedup of every static (D, V) tree at the traces' width: the throughput
    surface a policy moves on, with the grid best and the oracle marked."""
    from simspec.report.figures import surface

    out.print(f"figure written to {surface(profile, split, max_new_tokens, out_dir)}")


@plot_app.command("training")
def plot_training_command(
    policy: Annotated[str, typer.Option(help="A policy folder (policies/NAME).")],
    out_dir: FigureOut = "figures",
) -> None:
    """Training curves of a policy (LTD Figure 3 style): reward per step and validation
    speedup against environment steps, phase by phase, from its training.csv."""
    from simspec.report.figures import training

    out.print(f"figure written to {training(policy, out_dir)}")


@plot_app.command("validation")
def plot_validation_command(
    report: Annotated[str, typer.Option(help="A validate --real run folder (real/RUN) or its report.json.")],
    out_dir: Optional[str] = typer.Option(None, "--out", help="Folder for the figures (default: the run folder)."),
    method: Optional[str] = typer.Option(None, help="Also draw this method's action map (learned policies' are "
                                         "always drawn)."),
) -> None:
    """Redraw a real validation's figures from its report.json: simulated vs real speedup per
    method, the time breakdown (LTD Fig. 2 right), and action maps (LTD Fig. 6)."""
    from simspec.report.figures import validation

    out.print("figures written: " + ", ".join(str(p) for p in validation(report, out_dir, method)))


# --- entry point -----------------------------------------------------------------------------
def _exceptions(name: str) -> tuple[type, ...]:
    """Click's exception class ``name`` as typer raises it: its vendored copy (typer >= 0.17
    ships ``typer._click``) and the real click's, whichever are installed."""
    import importlib

    found = []
    for module in ("typer._click.exceptions", "typer.exceptions", "click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"simspec: error: {message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)


def _interrupted() -> None:
    err.print("simspec: interrupted", markup=False, highlight=False)
    sys.exit(130)


def _usage(exc) -> None:
    """A usage error (bad value, unknown option or verb, missing option) as one line, exit 2."""
    names, ctx = [], getattr(exc, "ctx", None)
    while ctx is not None and ctx.parent is not None:  # the verb's path, without the program name
        names.append(ctx.info_name)
        ctx = ctx.parent
    message = " ".join(exc.format_message().split())
    _fail(f"{message} (see simspec {' '.join([*reversed(names), '--help'])})")


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: user errors become one line on stderr and exit status 2; an
    interrupt, ``simspec: interrupted`` and exit status 130."""
    try:
        # Not standalone: typer would print usage errors as boxes and turn Ctrl-C into a
        # returned 130 (it catches KeyboardInterrupt and raises Exit(130), which it returns).
        code = app(args=argv, standalone_mode=False)
    except SimspecError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _interrupted()
    except Exception as exc:
        if isinstance(exc, _exceptions("NoArgsIsHelpError")):  # bare `simspec` / `simspec plot`: the help
            err.print(exc.ctx.get_help(), markup=False, highlight=False)
            sys.exit(2)
        if isinstance(exc, _exceptions("UsageError")):
            _usage(exc)
        if isinstance(exc, _exceptions("ClickException")):
            _fail(" ".join(exc.format_message().split()))
        if isinstance(exc, _exceptions("Abort")):  # click's name for an interrupt (or end of input) at a prompt
            _interrupted()
        if isinstance(exc, _exceptions("Exit")):
            sys.exit(exc.exit_code)
        raise
    if code == 130:
        _interrupted()
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
