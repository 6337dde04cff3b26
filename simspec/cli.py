"""The ``simspec`` command: the only place that parses flags or prints for a person. Each verb's
options are its request's fields (``simspec.flags``) plus its own ``--json`` and ``--threads``; it
hands the request progress callbacks and renders the summary it gets back."""

import importlib
import logging
import signal
import sys
import threading
from typing import Annotated

import typer

from simspec import __version__, flags
from simspec.errors import SimspecError
from simspec.flags import command
from simspec.report import console as show
from simspec.report.console import err, out
from simspec.report.console import json_line as _json
from simspec.report.console import run_with_progress as _run

# Click's plain help, not rich's panels: at 80 columns rich squeezes each flag's help into a
# column a fifth of the screen wide.
app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="simspec: calibrate speculative decoding once, simulate it fast, train tree policies, "
    "validate on real models.",
)
plot_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                       help="Draw figures from profiles and runs into figures/.")
app.add_typer(plot_app, name="plot")

# --- the verbs' own options (not the work's: those are the requests' fields) -----------------
# Declared once, as the requests' shared flags are (simspec.flags).
Threads = Annotated[int | None, typer.Option("--threads", help=flags.THREADS)]
Json = Annotated[bool, typer.Option("--json", help=flags.JSON)]
Simulated = Annotated[bool, typer.Option("--simulated", help=flags.SIMULATED)]
Real = Annotated[bool, typer.Option("--real", help="Run every method on the real engine, interleaved with plain greedy "
                                    "decoding, next to the simulator's prediction for the same prompts.")]


def _work(run, request, threads: int | None, render, as_json: bool, *extra, uses_torch: bool = True) -> None:
    """``run(request, bar, status, *extra)`` under progress bars, its summary rendered, then its --json line."""
    summary = _run(lambda bar, status: run(request, bar, status, *extra), threads, uses_torch)
    render(summary)
    _json(as_json, summary)


def _version_callback(value: bool) -> None:
    if value:
        out.print(f"simspec {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what simspec does."),
) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


# --- calibration -----------------------------------------------------------------------------
@command(app, "calibrate", "simspec.measure.calibrate:CalibrateRequest")
def calibrate(request, threads: Threads = None, as_json: Json = False) -> None:
    """Measure latency curves (or model them for an absent GPU), scale them to what whole
    engine cycles cost (the engine fit: plain decoding and static trees on train prompts), fit
    the cost model, and record draft-tree traces into one profile folder: everything the
    simulator needs to predict the real engine, with no refit.

    Writes calibration/GPU-DRAFT (with --traces-only calibration/traces-PROMPTS-DRAFT) unless
    --out. --n-prompts: prompts recorded, of both splits (each trace remembers its split).
    --seed: the latency runs' context token ids; at T > 0 prompt n's continuation samples from
    seed + n, and each tree keeps the target's probability of every node a cycle of V <= --nodes
    may verify (the simulator draws acceptance from them). --ray: the merged traces equal a
    single-process recording's (same content hash); each of --workers tasks asks Ray for
    --threads CPUs (and a GPU where the cluster has them)."""
    from simspec.measure.calibrate import calibrate as run

    plan = request.check()
    if plan.kind == "analytic":
        show.warn(f"no {plan.gpu.upper()} here: building an ANALYTIC roofline profile from public device specs "
                  "and the model architecture. It is a model, not a measurement.")
    _work(run, request, threads, show.calibrate, as_json, plan)


@command(app, "recalibrate", "simspec.measure.insitu:RecalibrateRequest")
def recalibrate(request, threads: Threads = None, as_json: Json = False) -> None:
    """Refit a measured profile's latency curves in situ: run plain greedy decoding and a ladder
    of static trees (V = 2..128) on the live engine, on train prompts, and scale each curve to the
    engine's own cycle timings (per verified size for verify and bookkeeping, per context for
    the plain step), as calibrate's engine fit does: for a machine whose speed has moved since
    it was calibrated. Takes minutes on a CPU at the defaults (times: docs/results.md). Writes a
    new profile that names the one it refits: PROFILE-insitu beside it, unless --out.
    --n-prompts: train prompts of the profile's set (never held-out ones)."""
    from simspec.measure.insitu import recalibrate as run

    checked = request.check()
    _work(run, request, threads or checked[0].meta.threads, show.recalibrate, as_json, checked)


# --- validation and training -----------------------------------------------------------------
@command(app, "validate", "simspec.measure.validate:ValidateRequest", lead=("simulated", "real"))
def validate(request, simulated: Simulated = False, real: Real = False, threads: Threads = None,
             as_json: Json = False) -> None:
    """Score baselines and learned policies against plain decoding (greedy, or sampling at the
    profile's temperature). --simulated: replay
    the profile's held-out traces, next to the hindsight oracle (seconds). --real: run them on
    the real models and report real and simulated speedups side by side, paired tests against
    EAGLE-3's default tree and the grid best, latency drift, and a lossless check; writes
    real/validate-PROFILE-PROMPTS/ unless --out (report.json, report.md, figures).

    --prompts, --n-prompts, --repeats, --recalibrate, --batch-size, --runtime, --out: --real
    only. At T > 0 each pass over the prompts is one seed per prompt (pass k, prompt i: seed +
    k * prompts + i), speedups and tau are means over the passes, and outputs are checked by a KS
    test of their PIT."""
    if real == simulated:
        raise SimspecError("choose one of --simulated (replay, seconds) or --real (the real engine)")
    if real and request.drafters:
        raise SimspecError("--drafters is read by validate --simulated (the select baseline) only")
    if real:
        from simspec.report.validation import summary_line

        checked = request.check()
        if request.batch_size > 1:
            from simspec.measure.validate_batch import validate_batch as run
        else:
            from simspec.measure.validate import validate_real as run
        threads = threads or checked[0].meta.threads
        report, run_dir = _run(lambda bar, status: run(request, bar, status, checked), threads)
        if request.batch_size > 1:
            show.validate_batch(report, run_dir)
            return _json(as_json, {"report": str(run_dir / "report.json"), **report.to_json()})
        show.validate_real(report, run_dir)
        return _json(as_json, summary_line(report, str(run_dir)))
    from simspec.sim.run import validate_simulated

    result = validate_simulated(request.simulated(), err.status)
    show.validate_simulated(result)
    _json(as_json, result.summary)


@command(app, "train", "simspec.train.run:TrainRequest", lead=("simulated",),
         options=("simspec.train.trainers:algorithm_options", "algo"))
def train(request, simulated: Simulated = False, threads: Threads = None, as_json: Json = False) -> None:
    """Train a tree policy in the simulator, in minutes on a CPU. Learns on the profile's
    training prompts (a fifth of them held back to pick the best checkpoint), measures the
    policy's decision time here, scores it on the held-out prompts against EAGLE-3's default
    tree, the best static tree and the hindsight oracle, and writes policies/NAME/: the
    exported inference networks, the SB3/torch checkpoints, metadata, training.csv and
    TensorBoard logs (tb/). NAME: ALGO-PROFILE[-PRESET] unless --out. --simulated is the only
    mode."""
    from simspec.train.run import total_work, train_policy
    from simspec.train.trainers import trainer

    if not simulated:
        raise SimspecError("training runs in the simulator: pass --simulated")
    request.check()
    label = f"train {request.algo} ({request.preset})"
    _work(lambda r, bar, status: train_policy(r, bar(label, total_work(r))), request, threads,
          lambda s: show.train(s, request), as_json, uses_torch=trainer(request.algo).uses_torch)


@command(app, "sweep", "simspec.train.sweep:SweepRequest")
def sweep(request, as_json: Json = False) -> None:
    """Train every combination of --algos x --rewards x --seeds on one profile (each trial is
    `simspec train --simulated`), one after another or as Ray tasks, and print the
    held-out speedup per configuration: mean and sd over seeds, beside the grid best.
    Writes policies/sweep-PROFILE (one policy folder per trial and sweep.json) unless --out."""
    from simspec.train.sweep import run

    request.check()
    _work(run, request, request.trial_threads, show.sweep, as_json)


@command(app, "demo", "simspec.demo:DemoRequest")
def demo(request, as_json: Json = False) -> None:
    """The whole loop on the shipped defaults, in minutes on a laptop CPU: a small
    calibration of this machine (quick latency grid; the shipped HumanEval draft-tree traces,
    which do not depend on the hardware), `fast` training of LTD and RADAR against it, a short
    real validation (the learned policies, EAGLE-3's default tree, the grid best and
    GammaTune, interleaved with plain greedy decoding), the figures, and a summary. Each step
    is an ordinary simspec command, printed before it runs.

    --n-prompts, --max-new-tokens: the real validation's held-out HumanEval prompts. --preset:
    fast takes about three minutes for LTD and under half a minute for RADAR on a 2-core EPYC.
    --runtime: eager, the default, is the faster end to end here, as the calibration and the
    validation would each compile their own graphs (docs/concepts.md#runtimes)."""
    from simspec.demo import run_demo

    summary = run_demo(request, _invoke, show.demo_step)
    show.demo(summary)
    if as_json:  # the validation as validate --json gives it; report.json in the folder holds the rest
        from simspec.report.validation import summary_line

        _json(True, {**summary, "report": summary_line(summary["report"], f"{summary['root']}/validate")})


def _invoke(args: list[str]) -> None:
    """Runs one simspec command in this process (a demo step); its interrupt stays an interrupt."""
    with flags.naming(args):
        code = app(args=args, standalone_mode=False)
    if code == 130:
        raise KeyboardInterrupt
    if code:
        raise typer.Exit(code)


@command(app, "bench-sim", "simspec.sim.run:BenchSimRequest")
def bench_sim(request, as_json: Json = False) -> None:
    """Replay throughput of the simulator: cycles per second for a static policy over
    COPIES copies of the profile's traces, on one core."""
    from simspec.sim.run import bench_sim as run

    s, n_prompts = run(request)
    show.bench_sim(s, n_prompts, request.repeats)
    _json(as_json, s)


@command(app, "load", "simspec.measure.load:LoadRequest")
def load(request, as_json: Json = False) -> None:
    """Speculation under load, in the simulator: a request stream (Poisson at each of the --rates, bursty
    with --bursts, or a --stream file) served by continuous batching through --max-batch rows,
    plainly and with every baseline; per method the throughput, time per output token (p50,
    p90), time to first token and goodput at --tpot-target, and per stream whether speculation
    pays. Each cycle is priced at the smallest batch size the profile measured that holds its
    busy rows. --surface adds static trees of each size; --out writes load.json and load.png
    (the metrics against the rate, where speculation stops paying shaded). --sweep serves the
    same streams under more profiles (--ray: each profile and rate a Ray task)."""
    from simspec.measure.load_sweep import serve

    _work(serve, request, None, show.load, as_json, uses_torch=request.live)


@command(app, "headroom", "simspec.sim.headroom:HeadroomRequest")
def headroom(request, as_json: Json = False) -> None:
    """How much an adaptive policy could add on a profile, before training one: on its held-out
    traces, the hindsight oracle, the information bound (the Bayes decision granted the whole
    drafted tree, its node classifier fitted on the train split), the best static tree, the
    seeds' rules and --policies, each a median speedup with its IQR and its share of the
    oracle's, per batch size; and the verdict: at most X % over the best static tree. --out
    writes headroom.json and headroom.png."""
    from simspec.report.figures import headroom_folder
    from simspec.sim.headroom import run

    s = _run(lambda bar, status: run(request, bar, status), None, uses_torch=False)
    if request.out:
        s["written"] = headroom_folder(s, request.out, request.force)
    show.headroom(s)
    _json(as_json, s)


@command(app, "tune", "simspec.sim.tune:TuneRequest")
def tune(request, as_json: Json = False) -> None:
    """The best static tree for a profile, in the settings of the engine you deploy: every static
    (D, V) replayed on the profile's train prompts, the best and the runner-up scored on its
    held-out prompts (speedup and margin), and the best tree per context band where it differs.
    Conventions: simspec's D counts tree levels with the root and V verified tokens with the
    root; SGLang's num-steps is D - 1, EAGLE's depth D - 2, vLLM's num_speculative_tokens D - 1."""
    from simspec.sim.tune import run

    tuned = run(request)
    show.tune(tuned)
    _json(as_json, tuned.summary)


# --- tools: the engine measured, drafters trained and exported, old traces migrated ----------
@command(app, "bench-engine", "simspec.measure.bench:BenchRequest")
def bench_engine(request, threads: Threads = None, as_json: Json = False) -> None:
    """Real engine: every static (D, W, V) tree vs plain decoding on the same prompts,
    interleaved; median speedup, acceptance length tau, time shares, and a lossless check
    (greedy: token for token; --temperature > 0: a KS test of the outputs' PIT)."""
    from simspec.measure.bench import bench_engine as run
    from simspec.measure.tree_grid import capped_note

    _work(run, request, threads, show.bench_engine, as_json, request.check())
    if note := capped_note(request.depths, request.widths, request.sizes):
        show.note(note)


@command(app, "latency", "simspec.measure.latency:LatencyRequest")
def latency(request, threads: Threads = None, as_json: Json = False) -> None:
    """Latency tables: one target forward vs V and L, one draft step vs W and L (median, IQR),
    and plain decoding's ms/token beside its memory floor (weight bytes / measured bandwidth).
    --json: every sample."""
    from simspec.engine.models import resolve_dtype
    from simspec.measure.latency import measure_latency  # torch: after the flags are checked

    resolve_dtype(request.dtype)
    _work(measure_latency, request, threads, lambda s: show.latency(s, request.contexts), as_json)


@command(app, "train-draft", "simspec.distill.run:TrainDraftRequest")
def train_draft(request, threads: Threads = None, as_json: Json = False) -> None:
    """Train a drafter for TARGET on teacher data it labels itself; resumable (a stopped run
    continues from OUT.partial/), deterministic from --seed (data order, initialisation,
    sampling). Writes real/drafters/KIND unless --out."""
    from simspec.distill.run import train_draft as run

    request.check()
    _work(run, request, threads, show.train_draft, as_json)


@command(app, "drafter-card", "simspec.distill.card_request:CardRequest")
def drafter_card(request, threads: Threads = None, as_json: Json = False) -> None:
    """Measure a trained drafter (held-out agreement with the target's greedy token, draft-step
    latency vs W, acceptance per depth on held-out HumanEval and ShareGPT prompts) and write its
    model card (README.md + measured.json) into the drafter's own folder, or --out for a second
    card (another dtype or machine) that must not replace the drafter's. --n-prompts: held-out
    prompts per source."""
    from simspec.distill.card import make_card

    request.check()
    _work(make_card, request, threads, show.drafter_card, as_json)


@command(app, "migrate-traces", "simspec.measure.migrate:MigrateRequest")
def migrate_traces(request, threads: Threads = None, as_json: Json = False) -> None:
    """Bring trace folders recorded by older simspec versions up to date, in place: the prompts'
    token ids (rendered again as calibrate renders them) and, for greedy traces, the greedy
    path's child ranks (the continuation walked again with the traces' own models). Their hash,
    and the profiles and policies built on them, stay valid; a folder up to date is left alone."""
    from simspec.measure.migrate import run

    _work(run, request, threads, show.migrated, as_json)


@command(app, "export-draft", "simspec.distill.export:ExportRequest")
def export_draft(request, as_json: Json = False) -> None:
    """Write an EAGLE-3 head (shipped, public or speculators layout) in the layout a serving
    engine loads: speculators (vLLM serves the folder alone) or public (SGLang, vLLM), into
    --out. --draft: the EAGLE-3 head to export."""
    from simspec.distill.export import run

    request.check()
    _work(lambda request, bar, status: run(request, status), request, None, show.exported, as_json)


# --- figures ---------------------------------------------------------------------------------
def _figures(paths: list, as_json: bool) -> None:
    out.print(f"figure written to {paths[0]}" if len(paths) == 1 else
              "figures written: " + ", ".join(str(p) for p in paths))
    _json(as_json, {"figures": [str(p) for p in paths]})


@command(plot_app, "curves", "simspec.report.figure_requests:CurvesPlot")
def plot_curves_command(request, as_json: Json = False) -> None:
    """Draft time vs depth and verify time vs V (LTD Figure 2, left): the profile's
    measurements with the fitted cost model drawn over them."""
    from simspec.report.figures import curves

    path, analytic = curves(request.profile, request.out, force=request.force)
    if analytic:
        show.warn("this profile is ANALYTIC (a roofline model, not a measurement); the figure says so")
    _figures([path], as_json)


@command(plot_app, "surface", "simspec.report.figure_requests:SurfacePlot")
def plot_surface_command(request, as_json: Json = False) -> None:
    """Simulated speedup of every static (D, V) tree at the traces' width: the throughput
    surface a policy moves on, with the grid best and the oracle marked."""
    from simspec.report.figures import surface

    r = request
    _figures([surface(r.profile, r.split, r.max_new_tokens, r.out, force=r.force)], as_json)


@command(plot_app, "training", "simspec.report.figure_requests:TrainingPlot")
def plot_training_command(request, as_json: Json = False) -> None:
    """Training curves of a policy (LTD Figure 3 style): reward per step and validation
    speedup against environment steps, phase by phase, from its training.csv."""
    from simspec.report.figures import training

    _figures([training(request.policy, request.out, force=request.force)], as_json)


@command(plot_app, "validation", "simspec.report.figure_requests:ValidationPlot")
def plot_validation_command(request, as_json: Json = False) -> None:
    """Redraw a real validation's figures from its report.json: simulated vs real speedup per
    method, the time breakdown (LTD Fig. 2 right), and action maps (LTD Fig. 6), into the run
    folder unless --out."""
    from simspec.report.figures import validation

    _figures(validation(request.report, request.out, request.method, force=request.force), as_json)


# --- entry point -----------------------------------------------------------------------------
def _exceptions(name: str) -> tuple[type, ...]:
    """Click's exception class ``name``: typer's vendored copy (``typer._click``) and click's, where installed."""
    found = []
    for module in ("typer._click.exceptions", "typer.exceptions", "click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def _fail(message: str) -> None:
    err.print(f"simspec: error: {message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(2)


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


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """Console entry point: a user error is one line on stderr, exit status 2; an interrupt (SIGINT or
    SIGTERM), ``simspec: interrupted``, exit status 130, after the work in flight checkpointed."""
    # only the main thread may set handlers; an in-process caller gets its own back
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None
    try:
        _main(argv)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> None:
    try:
        # Not standalone: typer would print usage errors as boxes and turn Ctrl-C into a
        # returned 130 (it catches KeyboardInterrupt and raises Exit(130), which it returns).
        from simspec.registry import load_plugins

        load_plugins()  # a plugin may add a verb (docs/extending.md#a-verb)
        with flags.naming(sys.argv[1:] if argv is None else argv):
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


if __name__ == "__main__":  # `python -m simspec.cli`: run the importable module, whose `app` a plugin's verb joins
    from simspec.cli import main as entry

    entry()
