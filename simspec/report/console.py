"""What the verbs show a person: progress bars on stderr while they work (plain lines, at most one a
minute per bar, when stderr is a log file: ``progress_log``), then tables and one-line results on
stdout, rendered from the same summaries their ``--json`` lines hold."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from simspec.report.progress_log import ProgressLog

if TYPE_CHECKING:
    from simspec.report.validation import ValidationReport

# Wide enough for the tables when stdout is a file or a pipe (rich would assume 80 columns).
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)


def default_threads() -> int:
    """``$OMP_NUM_THREADS`` when it is a positive integer, else every core."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else os.cpu_count() or 1


def run_with_progress(work, threads: int | None = None, uses_torch: bool = True):
    """``work(bar, status)`` under progress bars on stderr, torch's threads set first (``uses_torch``).
    ``bar(description, total)`` returns ``advance(n=1, description=None)``; ``status(text)`` is a
    context manager shown during steps without a count."""
    if uses_torch:
        import torch

        torch.set_num_threads(threads or default_threads())
    if not err.is_terminal:  # a log file gets plain lines, not frames
        log = ProgressLog(sys.stderr)
        return work(log.bar, log.status)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("eta"), TimeRemainingColumn(), console=err, transient=False)

    def bar(description: str, total: int):
        task = progress.add_task(description, total=total)
        return lambda n=1, description=None: progress.update(
            task, advance=n, **({"description": description} if description else {}))

    @contextmanager
    def status(text: str):
        # A step without a count, shown as a pulsing bar in the same live display (a second
        # live display, rich's own status spinner, would leave a line behind on an error).
        task = progress.add_task(text, total=None)
        try:
            yield
        finally:
            progress.remove_task(task)

    with progress:
        try:
            return work(bar, status)
        except BaseException:
            # An error or an interrupt ends in one line of its own: erase the bars (and the blank
            # line an empty live display leaves) instead of printing their last frame above it.
            progress.live.transient = True
            raise


def json_line(as_json: bool, summary: dict) -> None:
    if as_json:
        print(json.dumps(summary))


def warn(*texts: str) -> None:
    for text in texts:
        err.print(f"[yellow]warning:[/] {text}")


def note(text: str) -> None:
    err.print(f"note: {text}", markup=False, highlight=False)


def table(title: str, columns, rows, left: str = "method") -> None:
    grid = Table(title=title, title_justify="left")
    for col in columns:
        grid.add_column(col, justify="left" if col == left else "right")
    for row in rows:
        grid.add_row(*row)
    out.print(grid)


def divergences(found: list[tuple[str, list[dict]]]) -> None:
    """One line per output that differs from greedy decoding, from (whose, their divergences) pairs."""
    from simspec.engine.lossless import Divergence

    for name, ds in found:
        for d in ds:
            err.print(f"[yellow]{name} on {d['prompt']}: {Divergence.from_dict(d).describe()}[/]", highlight=False)


def _replay_verdict(checks: list[dict]) -> str:
    same, total = sum(c["matches"] for c in checks), sum(c["cycles"] for c in checks)
    return f"; replay check: {same}/{total} cycles' accepted lengths equal the live engine's" if checks else ""


def _f(row: dict, key: str, spec: str) -> str:
    """``row[key]`` formatted; the JSON's null for what does not apply (the oracle's tau) as -."""
    value = row[key]
    return "-" if value is None or value != value else format(value, spec)


def _device(s: dict) -> str:
    """A profile's device with its CPU or GPU model name, where the device string lacks it."""
    model = s.get("device_model")
    return s["device"] if not model or model in s["device"] else f"{model}, {s['device']}"


def bench_engine(s: dict) -> None:
    from simspec.report.validation import lossless_label

    best, rows = s["best"], s["configs"]
    is_best = lambda r: all(r[k] == best[k] for k in ("depth", "width", "size"))  # noqa: E731
    table(f"bench-engine: target {s['target']}, draft {s['draft']}, {s['n_prompts']} {s['prompts']} ({s['split']}) "
          f"prompts, {s['max_new_tokens']} new tokens, device {s['device']}, batch {s['batch_size']}, "
          f"{s['runtime']} runtime" + (f" (compiled in {s['compile_s']:.0f} s, outside the timed runs)"
                                       if s["runtime"] == "compiled" else "")
          + (f", T={s['temperature']:g} top-p {s['top_p']:g} seed {s['seed']}" if s.get("temperature") else ""),
          ("D", "W", "V", "speedup (median)", "IQR", "per pass", "tau", "tokens/s", "draft", "verify", "bookkeeping",
           "lossless"),
          [(str(r["depth"]), str(r["width"]), str(r["size"]), f"{r['speedup']:.3f}{' *' if is_best(r) else ''}",
            f"{r['speedup_q25']:.2f}-{r['speedup_q75']:.2f}", "/".join(f"{m:.2f}" for m in r["repeat_medians"]),
            f"{r['tau']:.2f}", f"{r['tokens_per_s']:.1f}", f"{r['time_shares']['draft']:.0%}",
            f"{r['time_shares']['verify']:.0%}",
            f"{r['time_shares']['bookkeeping']:.1%}", lossless_label(r["exact_match"], r["lossless"], r.get("pit_p")))
           for r in rows], left="")
    out.print(f"best: D={best['depth']} W={best['width']} V={best['size']} speedup {best['speedup']:.3f}x (* above); "
              f"plain decoding {s['plain_tokens_per_s']:.1f} tokens/s over the batch of {s['batch_size']}")
    divergences([(f"D={r['depth']} W={r['width']} V={r['size']}", r["divergences"]) for r in rows])


def latency(s: dict, contexts) -> None:
    ms = lambda x: f"{x['median'] * 1e3:.1f} [{x['q25'] * 1e3:.1f}-{x['q75'] * 1e3:.1f}]"  # noqa: E731
    for kind, name, label in (("verify", f"target forward, {s['target']}", "V"),
                              ("draft", f"draft step, {s['draft']}", "W")):
        samples = [x for x in s["samples"] if x["kind"] == kind]
        cell = {(x["tokens"], x["context"]): x for x in samples}
        table(f"{name} ({s['device']}): median ms [IQR]", (label, *(f"L={c}" for c in contexts)),
              [(str(n), *(ms(cell[n, c]) for c in contexts)) for n in sorted({x["tokens"] for x in samples})])
    plain = s["plain_decoding"]
    per_token = ", ".join(f"L={c} {v:.1f}" for c, v in plain["ms_per_token"].items())
    out.print(f"plain decoding ({s['dtype']}): {per_token} ms/token; memory floor {plain['memory_floor_ms']:.1f} ms "
              f"({plain['weight_bytes'] / 1e6:.0f} MB of weights at {plain['bandwidth_gbs']:.1f} GB/s measured)")


def train_draft(s: dict) -> None:
    if "text_store" in s:  # --text-only
        out.print(f"teacher text in {s['text_store']}: {s['rows']} continuations, {s['new_rows']} new "
                  f"({s['generated_tokens']} tokens generated in {s['seconds']:.0f} s, "
                  f"{s['tokens_per_s']:.0f} tokens/s)")
        return
    out.print(f"drafter written to {s['drafter']}: held-out top-1 {s['heldout_top1']:.3f}, top-10 "
              f"{s['heldout_top10']:.3f} on the target's own greedy text; draft vocabulary covers "
              f"{s['coverage']:.1%} of its greedy tokens; data {s['data_seconds']:.0f} s, training "
              f"{s['train_seconds']:.0f} s"
              + (f" (the --init head it continued: held-out top-1 {s['init_heldout_top1']:.3f} before training)"
                 if "init_heldout_top1" in s else ""))


def drafter_card(s: dict) -> None:
    sources = "; ".join(f"{src} {a['top1']:.3f}" for src, a in s["by_source"].items())
    taus = "; ".join(f"{src} {name} {t:.2f}" for src, runs in s["tau"].items() for name, t in runs.items())
    out.print(f"model card written to {s['card']} ({s['dtype']}): held-out top-1 {s['heldout_top1']:.3f} "
              f"(top-10 {s['heldout_top10']:.3f}) over {s['positions']} positions ({sources}); tau: {taus}")


def exported(s: dict) -> None:
    out.print(f"{s['draft']} written to {s['out']} in the {s['layout']} layout: {', '.join(s['files'])} "
              f"({s['megabytes']:.1f} MB)")


def calibrate(s: dict) -> None:
    if "traces" in s:  # --traces-only
        out.print(f"traces written to {s['traces']}: {s['prompts']} prompts, {s['positions']} positions, "
                  f"{s['megabytes']:.1f} MB, recorded in {s['record_seconds']:.0f} s"
                  + _replay_verdict(s["replay_check"]))
        return
    out.print(f"profile written to {s['profile']} ({s['kind']}, {_device(s)}): cost model held-out relative error "
              f"median {s['fit_error_median']:.1%}, p90 {s['fit_error_p90']:.1%}"
              + (f"; {s['prompts']} prompts, {s['positions']} positions" if s["prompts"] else "")
              + _replay_verdict(s["replay_check"]))
    fit = s.get("engine_fit")
    if fit:
        ratios = ", ".join(f"{op} {r:.2f}" for op, r in fit["live_over_tight_loop"].items())
        spread = ", ".join(f"{curve} {v:.1%}" for curve, v in fit["spread"].items())
        out.print(f"engine fit: {fit['cycles']:,} live cycles on {len(fit['prompt_ids'])} train prompts in "
                  f"{fit['seconds']:.0f} s; live / tight loop: {ratios}; the curves scaled to them (spread over the "
                  f"prompts: {spread or 'n/a, one prompt'})" + _pace(fit.get("tight_loop_pace")))
        for batch, at in fit.get("batches", {}).items():
            ratios = ", ".join(f"{op} {r:.2f}" for op, r in at["live_over_tight_loop"].items())
            out.print(f"engine fit at batch {batch}: {at['cycles']:,} batched cycles in {at['seconds']:.0f} s; live / "
                      f"tight loop: {ratios}")


def _pace(pace: dict | None) -> str:
    """The tight loop timed again around the fit, over the curves' prices: the machine's move since them."""
    if not pace:
        return ""
    verify = ", ".join(f"V={v} {r:.2f}" for v, r in pace["verify"].items())
    return (f"; the tight loop again just before and after them, over the curves' prices (the machine's pace since, "
            f"which the scales carry): plain step {pace['greedy step']:.2f}, verify {verify}")


def recalibrate(s: dict) -> None:
    warn(*s.get("warnings", []))
    ratios = ", ".join(f"{op} {r:.2f}" for op, r in s["live_over_profile"].items())
    out.print(f"{s['profile']}: {s['base']} refitted to {s['cycles']:,} live cycles on {s['prompts']} train prompts "
              f"in {s['seconds']:.0f} s; live / profile before: {ratios}")


def validate_simulated(result) -> None:
    s = result.summary
    warn(*result.notes)
    if s["kind"] == "analytic":
        warn(f"ANALYTIC profile: these times come from a model, not a measurement ({s['runtime']})")
    elif s["kind"] == "imported":
        warn(f"IMPORTED curves: these times are {s['runtime']}'s, measured outside simspec")
    tokens = "all recorded" if s["max_new_tokens"] is None else s["max_new_tokens"]
    table(f"validate --simulated: {result.label}; {s['prompts']} {s['split']} prompts, {tokens} tokens",
          ("method", "speedup (median)", "IQR", "mean", "tau", "cycles", "draft calls", "share of oracle"),
          [(r["name"], _f(r, "speedup_median", ".3f"), f"{_f(r, 'speedup_q25', '.2f')}-{_f(r, 'speedup_q75', '.2f')}",
            *(_f(r, k, f) for k, f in (("speedup_mean", ".3f"), ("tau", ".2f"), ("cycles", ".1f"),
                                       ("draft_calls", ".1f"), ("share_of_oracle", ".1%"))))
           for r in s["rows"] + [s["oracle"]]])
    out.print(f"replayed {len(s['rows'])} methods + oracle on {result.positions} positions in {s['seconds']:.1f} s "
              f"(replay: {s['cycles_per_s']:,.0f} cycles/s)")
    if "selection" in s:
        picks = ", ".join(f"{d['name']} {d['chosen']} (best {d['best_in_hindsight']}, alpha error "
                          f"{d['alpha_mae']:.3f})" for d in s["selection"]["drafters"])
        out.print(f"draft selection (seed 003) chose per prompt: {picks}; fixed best on the train split: "
                  f"{s['selection']['fixed']}; the oracle and its shares are the main profile's drafter's")


def validate_real(report: ValidationReport, run_dir) -> None:
    from simspec.report.markdown import predicted_by, rank_text, spread
    from simspec.report.validation import fidelity_rows

    warn(*report.warnings)
    corrected = report.drift_corrected
    pct = lambda v: "-" if v is None else f"{v:+.1%}"  # noqa: E731
    pv = lambda v: "-" if v is None else f"{v:.1e}"  # noqa: E731
    sampled = bool(report.temperature)
    mode = (f", T = {report.temperature:g}, {report.repeats} seeds per prompt" if sampled else "")
    table(f"validate --real: {report.profile.name} ({report.device}); {report.n_prompts} "
          f"{report.prompts} ({report.split}) prompts, {report.max_new_tokens} new tokens{mode}, {report.runtime} "
          "runtime" + (f" (compiled in {report.compile_s:.0f} s, before the timed runs)" if report.compile_s else ""),
          ("method", "real (mean)" if sampled else "real (median)", "95% CI" if sampled else "IQR", "sim",
           "sim error", "sim drift-corr.", "tau real/sim", "draft calls",
           "vs EAGLE-3", "p", "vs grid", "p", "lossless"),
          [(r.method, f"{r.speedup_real:.3f}", spread(r).replace("–", "-"),
            f"{r.speedup_sim:.3f}", f"{r.rel_error:+.1%}",
            f"{r.speedup_sim_drift_corrected:.3f} ({r.rel_error_drift_corrected:+.1%})",
            f"{r.tau:.2f}/{r.tau_sim:.2f}", f"{r.draft_calls:.1f}", pct(r.gain_vs_eagle3),
            pv(r.p_vs_eagle3), pct(r.gain_vs_grid), pv(r.p_vs_grid), r.verdict())
           for r in sorted(report.rows, key=lambda r: -r.speedup_real)])
    drift = ", ".join(f"{op} {ratio:.2f}" for op, ratio in report.drift.ratios.items())
    for i, f in enumerate(fidelity_rows(report)):
        noise = "" if f["noise_mean"] is None else (
            f" (an exact simulator vs this run's noise: {f['noise_mean']:.1%} / {f['noise_max']:.1%})")
        out.print(f"{'simulator' if i == 0 else '         '}: {f['prediction']}, {f['statistic']}: mean |error| "
                  f"{f['mean']:.1%}, max {f['max']:.1%}, Spearman {rank_text(f['spearman'])}{noise}")
    out.print(f"drift-corrected (median over prompts): mean {corrected.mean_abs_rel_error:.1%}, max "
              f"{corrected.max_abs_rel_error:.1%}, Spearman {rank_text(corrected.rank_agreement)}; "
              f"drift (live / profile): {drift}")
    if report.drift.advice:
        warn(report.drift.advice)
    divergences([(r.method, r.divergences) for r in report.rows])
    out.print(predicted_by(report.profile, report.staleness))
    out.print(f"report written to {run_dir}/ (report.json, report.md, figures) in {report.seconds:.0f} s")


def train(s: dict, request) -> None:
    r = request
    if r.preset == "fast":
        out.print("preset fast: the paper's networks with about a tenth of its steps; train with --preset paper "
                  "for the reported results")
    elif r.preset == "smoke":
        out.print("preset smoke: seconds of training that check the wiring; the policy learns little. Train "
                  "with --preset fast or paper for a policy worth validating")
    out.print(f"{s['policy']}: {r.algo} ({r.preset}, reward {r.reward}, seed {r.seed}, {r.resolved_precision()}) "
              f"trained in {s['train_seconds']:.0f} s, {s['env_steps']:,} environment steps "
              f"({s['env_steps'] / s['train_seconds']:,.0f}/s)")
    out.print(f"held-out speedup (simulated, median): {s['heldout_speedup']:.3f} | grid best "
              f"{s['grid_best_speedup']:.3f} | EAGLE-3 default {s['eagle3_speedup']:.3f} | "
              f"share of the oracle {s['oracle_share']:.1%}")


def demo_step(i: int, n: int, step: list[str]) -> None:
    err.rule(f"demo step {i}/{n}: simspec {' '.join(step)}", align="left")


def demo(s: dict) -> None:
    report = s["report"]
    err.rule("demo summary", align="left")
    fit = f", fitted to the engine's cycles in {s['engine_fit_seconds']:.0f} s" if s.get("engine_fit_seconds") else ""
    out.print(f"calibrated {_device(s)} in {s['curves_seconds']:.0f} s{fit}: cost model held-out error median "
              f"{s['fit_error_median']:.1%}")
    if s.get("headroom"):
        from simspec.sim.headroom import verdict_line

        out.print(verdict_line(s["headroom"]))
    for p in s["policies"]:
        out.print(f"trained {p['algo']} ({p['preset']} preset) in {p['train_seconds']:.0f} s: simulated held-out "
                  f"speedup {p['speedup']:.3f} (grid best {p['grid_best_speedup']:.3f})")
    table(f"real validation: {report.n_prompts} held-out HumanEval prompts, {report.max_new_tokens} new tokens; "
          "speedup over the set (time per token summed over the prompts)",
          ("method", "real", "simulated", "error", "interval", "lossless"),
          [(r.method, f"{r.speedup_real_set:.3f}", f"{r.speedup_sim_set:.3f}", f"{r.rel_error_set:+.1%}",
            "—" if r.speedup_sim_set_interval is None else
            f"{r.speedup_sim_set_interval[0]:.3f}-{r.speedup_sim_set_interval[1]:.3f}"
            + ("" if r.in_interval else " (out)"), r.verdict())
           for r in sorted(report.rows, key=lambda r: -r.speedup_real_set)])
    whole = report.over_the_set
    line = (f"simulator, over the set, no refit: mean |error| {whole.mean_abs_rel_error:.1%}, max "
            f"{whole.max_abs_rel_error:.1%}, rank agreement {whole.rank_agreement:.2f}")
    if report.intervals:
        inside = sum(bool(r.in_interval) for r in report.rows)
        line += f"; real speedup inside its interval for {inside} of {len(report.rows)} methods"
    out.print(line)
    staleness = report.staleness or {}
    for note in staleness.get("notes", []):
        out.print(f"note: {note}")
    if staleness and not staleness.get("notes"):
        out.print(f"the machine held still: plain decoding moved {staleness['plain_moved']:.1%} through the runs")
    if report.drift.advice:
        out.print(f"note: {report.drift.advice}")
    out.print(f"demo finished in {s['seconds'] / 60:.1f} min; everything is in {s['root']}/ (profile/, policies/, "
              "validate/ with report.md and figures, figures/)")


def bench_sim(s: dict, n_prompts: int, repeats: int) -> None:
    rates = s["all_cycles_per_s"]
    out.print(f"replay of static D={s['depth']} V={s['size']} over {s['copies']} x {n_prompts} prompts: "
              f"{s['cycles']:,} cycles per replay, median {s['cycles_per_s']:,.0f} cycles/s "
              f"(range {rates[0]:,.0f}-{rates[-1]:,.0f}, {repeats} repeats)"
              + (f"; T = {s['temperature']:g}: each cycle's acceptance drawn from its tree's law"
                 if s.get("temperature") else ""))


def _load_cells(r: dict) -> list[str]:
    return [f"{r['throughput_tokens_per_s']:.1f}", f"{1e3 * r['tpot_p50_s']:.1f}", f"{1e3 * r['tpot_p90_s']:.1f}",
            f"{r['ttft_p50_s']:.2f}", f"{r['goodput_requests_per_s']:.3f}"]


def _load_paired(r: dict) -> list[str]:
    """Real / simulated, the simulation's error beside each compared metric (goodput: none), and the lossless check."""
    errors = [*r["rel_error"].values(), None]  # in the cells' order: throughput, TPOT p50 and p90, TTFT p50
    return [f"{a} / {b}" + (f" ({e:+.0%})" if e is not None else "")
            for a, b, e in zip(_load_cells(r["real"]), _load_cells(r), errors)] + [
        "yes" if r["lossless"] else "n/a (T > 0)" if r["lossless"] is None else "NO"]


def load(s: dict) -> None:
    if s.get("schema") == "simspec-load-sweep":
        for profile in s["profiles"]:
            load(profile)
        where = f"as Ray tasks ({s['ray']})" if s["ray"] else "in this process"
        out.print(f"{len(s['profiles'])} profiles, {s['runs']} load runs {where}"
                  + ("; written: " + ", ".join(s["written"]) if s.get("written") else ""))
        return
    if s["kind"] == "analytic":
        warn("ANALYTIC profile: these latencies come from a model of the device, not a measurement")
    live = s.get("live")
    columns = ["method", "tokens/s", "TPOT p50 ms", "TPOT p90 ms", "TTFT p50 s", "goodput req/s"]
    pays = {True: "pays", False: "does not pay"}
    for verdict in s["verdicts"]:
        stream = verdict["stream"]
        rows = [r for r in s["rows"] if r["stream"] == stream]
        label = _stream_name(stream)
        table(f"load: {label}, {rows[0]['requests']} requests, max batch {s['max_batch']} ({s['profile']})"
              + (": real / simulated (error)" if live else ""), columns + (["lossless"] if live else []),
              [(r["method"], *(_load_paired(r) if live else _load_cells(r))) for r in rows])
        out.print(f"best: {verdict['best']}; speculation {pays[verdict['speculation_pays']]} here"
                  + (f" (real: {pays[verdict['speculation_pays_real']]})" if live else "")
                  + f" (best speculative: {verdict['best_speculative']}; goodput at TPOT <= "
                  f"{1e3 * s['tpot_target_s']:.0f} ms, then throughput, then TPOT p50; within 1 % a tie)")
        if live and "rel_error_first_refit" in rows[0]:  # --refit-each-stream
            out.print("each run above priced by a refit made right before it; the same runs under the first refit: "
                      + "; ".join(f"{r['method']} " + ", ".join(
                          f"{label} {e:+.0%}" if e is not None else f"{label} n/a" for label, e in
                          zip(("tokens/s", "TPOT p50", "p90", "TTFT p50"), r["rel_error_first_refit"].values()))
                          for r in rows))
    if s.get("surface"):
        _load_surface(s)
    if s.get("written"):
        out.print("written: " + ", ".join(s["written"]))


def _load_surface(s: dict) -> None:
    sizes = sorted({r["size"] for r in s["surface"]})
    rows = []
    for verdict in s["verdicts"]:
        plain = next(r for r in s["rows"] if r["method"] == "plain" and r["stream"] == verdict["stream"])
        mine = {r["size"]: r for r in s["surface"] if r["stream"] == verdict["stream"]}
        ratio = {v: mine[v]["throughput_tokens_per_s"] / plain["throughput_tokens_per_s"] for v in sizes}
        rows.append((_stream_name(verdict["stream"]), *(f"{ratio[v]:.3f} (D={mine[v]['depth']})" for v in sizes)))
    table("throughput of a static tree of size V over plain decoding's (its depth: the best on the train split)",
          ["stream", *(f"V={v}" for v in sizes)], rows)


def _stream_name(stream: dict) -> str:
    return stream.get("source") or f"{stream['kind']} at {stream['rate']:g} requests/s"


def headroom(s: dict) -> None:
    from simspec.sim.headroom import verdict_line

    warn(*s["notes"])
    if s["kind"] == "analytic":
        warn("ANALYTIC profile: these speedups come from a model of the device, not a measurement")
    for batch in s["batches"]:
        table(f"headroom on {s['profile']} at batch {batch['batch_size']}: {s['heldout_prompts']} held-out prompts, "
              f"T = {s['temperature']:g}", ("method", "speedup (median)", "IQR", "share of the oracle"),
              [(r["method"], f"{r['speedup']:.3f}", f"{r['q25']:.2f}-{r['q75']:.2f}", f"{r['share_of_oracle']:.0%}")
               for r in batch["rows"]])
        out.print(verdict_line(batch))
    if s.get("written"):
        out.print("written: " + ", ".join(s["written"]))


def migrated(s: dict) -> None:
    for f in s["folders"]:
        added = " and ".join(f["added"])
        out.print(f"{f['traces']}: " + (f"{added} added ({f['prompts']} prompts, {f['positions']} positions), hash "
                                        f"{f['content_hash']} unchanged" if added else "up to date, left alone"))


def tune(tuned) -> None:
    s = tuned.summary
    warn(*tuned.notes)
    r = s["runner_up"]
    batch = f", batch {s['batch_size']}" if s["batch_size"] > 1 else ""
    out.print(f"best static tree for {s['profile']} ({s['device']}{batch}), chosen on {s['prompts']['train']} train "
              f"prompts out of {s['candidates']} trees: D {s['depth']}, W {s['width']}, V {s['size']}")
    out.print(f"  held-out speedup {s['speedup']:.3f} [IQR {s['speedup_q25']:.2f}-{s['speedup_q75']:.2f}] over "
              f"{s['prompts']['heldout']} prompts; runner-up D {r['depth']}, V {r['size']}: {r['speedup']:.3f} "
              f"(margin {s['margin']:+.1%} held out, {s['margin_train']:+.1%} on train)")
    for band in s["bands"]:
        mark = "" if (band["depth"], band["size"]) == (s["depth"], s["size"]) else "  <- differs"
        out.print(f"  context {band['context'][0]}-{band['context'][1]}: D {band['depth']}, V {band['size']} "
                  f"(~{band['speedup']:.2f}x per cycle, {band['positions']} positions){mark}")
    out.print(f"{s['engine']}: {s['flags']}")
    if "sequoia" in s:
        q = s["sequoia"]
        out.print(f"Sequoia's tree of any shape: {q['nodes']} nodes, depth {q['depth']}, per level "
                  f"{'/'.join(map(str, q['per_level']))}; held-out speedup {q['speedup']:.3f} "
                  f"({q['speedup'] / s['speedup'] - 1:+.1%} vs the tree above)")
        out.print(f"  {q['flags']}")
    if "per_batch" in s:
        table(f"per batch size ({s['engine']}): held-out speedup over plain decoding at the same batch size",
              ("batch", "best tree (D, V)", "speedup", "best chain (D)", "speedup", "runner-up chain (D)"),
              [(str(r["batch_size"]), f"{r['tree']['depth']}, {r['tree']['size']}", f"{r['tree']['speedup']:.3f}",
                str(r["chain"]["depth"]), f"{r['chain']['speedup']:.3f}", str(r["chain"]["runner_up"]["depth"]))
               for r in s["per_batch"]])
        config = s["per_batch_config"]
        out.print(f"{s['engine']}, per batch size: {config['flags']}")
        if "adaptive_config" in config:
            out.print(f"adaptive.json: {json.dumps(config['adaptive_config'])}")
    if "load" in s:
        _tune_load(s)


def _tune_load(s: dict) -> None:
    load, ms = s["load"], 1e3 * s["load"]["tpot_target_s"]
    bands = list(load["draft_lens"])
    table(f"draft length K per batch band for {load['rate']:g} requests/s through {load['max_batch']} rows "
          f"(goodput at TPOT <= {ms:g} ms, then throughput, then latency; chosen on train prompts)",
          ("batch <=", *bands), [("tuned for the load", *(str(load["draft_lens"][b]) for b in bands)),
                                 ("tuned for throughput", *(str(load["throughput_tuned"][b]) for b in bands))])
    table(f"a held-out stream at {load['rate']:g} requests/s ({load['duration_s']:g} s)",
          ("schedule", "goodput req/s", "tokens/s", "TPOT p50 / p90 ms", "TTFT p50 s"),
          [(name, f"{row['goodput_requests_per_s']:.3f}", f"{row['throughput_tokens_per_s']:.1f}",
            f"{1e3 * row['tpot_p50_s']:.1f} / {1e3 * row['tpot_p90_s']:.1f}", f"{row['ttft_p50_s']:.2f}")
           for name, row in (("tuned for the load", load["heldout"]["tuned"]),
                             ("tuned for throughput", load["heldout"]["throughput_tuned"]),
                             ("plain decoding", load["heldout"]["plain"]))])
    config = s["load_config"]
    out.print(f"{s['engine']}, tuned for the load: {config['flags']}")
    if "adaptive_config" in config:
        out.print(f"adaptive.json: {json.dumps(config['adaptive_config'])}")


def validate_batch(report, run_dir) -> None:
    from simspec.report.validation import lossless_label

    warn(*report.warnings)
    table(f"validate --real at batch {report.batch_size}: {report.n_prompts} {report.prompts} prompts, "
          f"{report.max_new_tokens} new tokens, {report.repeats} pass(es), {report.device}",
          ("method", "real", "per pass", "simulated", "error", "tokens/s", "cycles real/sim", "lossless"),
          [(r.method, f"{r.speedup_real:.3f}", "/".join(f"{x:.2f}" for x in r.speedup_real_passes),
            f"{r.speedup_sim:.3f}", f"{r.rel_error:+.1%}", f"{r.tokens_per_s_real:.1f}",
            f"{r.cycles_real:.0f}/{r.cycles_sim:.0f}", lossless_label(r.exact_match, r.lossless, r.pit_p))
           for r in report.rows])
    noise = report.measurement_noise
    out.print(f"mean |error| {report.mean_abs_rel_error:.1%}, max {report.max_abs_rel_error:.1%}"
              + (f" (an exact simulator vs these passes' scatter: {noise['exact_model_mean_abs_rel_error']:.1%} / "
                 f"{noise['exact_model_max_abs_rel_error']:.1%})" if noise else "")
              + f"; plain decoding {report.plain_tokens_per_s_real:.1f} tokens/s over the batch; written to {run_dir}")


def sweep(s: dict) -> None:
    where = f"Ray ({s['ray']})" if s["ray"] else "this process"
    table(f"sweep {s['sweep']}: {len(s['trials'])} trials on {s['profile']} (preset {s['preset']}, {where}, "
          f"{s['threads']} torch thread(s) each); held-out speedup over seeds",
          ("algorithm", "reward", "seeds", "mean", "sd", "per seed", "grid best", "EAGLE-3"),
          [(r["algo"], r["reward"], ",".join(map(str, r["seeds"])), f"{r['speedup_mean']:.3f}",
            f"{r['speedup_sd']:.3f}", " ".join(f"{v:.3f}" for v in r["speedups"]), f"{r['grid_best_speedup']:.3f}",
            f"{r['eagle3_speedup']:.3f}") for r in s["table"]])
    out.print(f"{len(s['trials'])} policies in {s['sweep']} ({s['seconds']:.0f} s)")
