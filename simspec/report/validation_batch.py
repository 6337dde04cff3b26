"""``report.json`` of ``validate --real --batch-size B`` (B > 1): per method the real speedup over plain
decoding at batch B (the prompt set as one queue through B rows) beside the simulator's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from simspec.report.validation import lossless_label
from simspec.schema import Artifact, Record

BATCH_REPORT_SCHEMA, BATCH_REPORT_VERSION = "simspec-validation-batch", 1


@dataclass(frozen=True, kw_only=True)
class BatchRow(Record):
    method: str
    speedup_real: float  # median (T > 0: mean) over passes of plain time / method time for the whole queue
    speedup_real_passes: list = field(metadata={"what": "a list of numbers"})
    speedup_sim: float
    rel_error: float  # (sim - real) / real
    tokens_per_s_real: float
    cycles_real: float  # T > 0: the mean over passes
    cycles_sim: float
    lossless: bool
    exact_match: bool | None = None  # T > 0: None (the outputs are judged by their PIT)
    pit_p: float | None = None  # T > 0: KS p-value of every output token's PIT under the target
    divergences: list = field(default_factory=list)
    speedup_sim_passes: list | None = None  # the replay of each pass's queue (greedy: one, for every pass)
    draft_calls_real: float | None = None  # the drafter's batched forwards (T > 0: the mean over passes)
    draft_calls_sim: float | None = None


@dataclass(frozen=True, kw_only=True)
class BatchValidationReport(Artifact):
    SCHEMA: ClassVar[str] = BATCH_REPORT_SCHEMA
    VERSIONS: ClassVar[tuple[int, ...]] = (BATCH_REPORT_VERSION,)
    batch_size: int
    profile: dict
    device: str
    prompts: str
    n_prompts: int
    max_new_tokens: int
    repeats: int
    rows: list[BatchRow] = field(metadata={"what": "a list of method rows"})
    mean_abs_rel_error: float
    max_abs_rel_error: float
    plain_tokens_per_s_real: float
    plain_cycles_real: float
    plain_cycles_sim: float
    temperature: float = 0.0
    # the scored runs' live / profile time per operation, the profile's curves at B pricing their cycles
    live_over_profile: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    seconds: float | None = None
    # --recalibrate: the same queues predicted by a second refit timed between the scored runs
    co_timed_refit: dict | None = None
    # the passes' scatter of real / simulated: the |error| an exact simulator would show (validation.measurement_noise)
    measurement_noise: dict | None = None


def render_markdown(report: BatchValidationReport) -> str:
    lines = [f"# validate --real at batch {report.batch_size}: {report.n_prompts} {report.prompts} prompts, "
             f"{report.max_new_tokens} new tokens, {report.repeats} pass(es), {report.device}", "",
             f"Profile {report.profile.get('name')} ({report.profile.get('hash')}). Speedup: plain decoding's time for "
             "the whole queue over the method's, at the same batch size ("
             + (f"mean over passes, sampled at T = {report.temperature:g}, each pass with its own seeds; lossless: the "
                "outputs' PIT under the target not rejected, p shown" if report.temperature > 0 else
                "median over passes") + ").", "",
             *([f"Its curves at batch {report.batch_size} were refitted in situ in this run (`--recalibrate`, "
                f"{report.profile.get('refit_seconds')} s), on train prompts, through the same rows: live / profile "
                + ", ".join(f"{op} {r:.3f}" for op, r in report.profile["refit_live_over_profile"].items()) + ".", ""]
               if report.profile.get("refit") else []),
             "| method | real | per pass | simulated | error | tokens/s | cycles real / sim | draft calls real / sim "
             "| lossless |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    def calls(r: BatchRow) -> str:
        return "" if r.draft_calls_sim is None else f"{r.draft_calls_real:.0f} / {r.draft_calls_sim:.0f}"

    for r in report.rows:
        passes = " / ".join(f"{x:.3f}" for x in r.speedup_real_passes)
        lines.append(f"| {r.method} | {r.speedup_real:.3f} | {passes} | {r.speedup_sim:.3f} | {r.rel_error:+.1%} | "
                     f"{r.tokens_per_s_real:.1f} | {r.cycles_real:.0f} / {r.cycles_sim:.0f} | {calls(r)} | "
                     f"{lossless_label(r.exact_match, r.lossless, r.pit_p)} |")
    lines += ["", f"Mean |error| {report.mean_abs_rel_error:.1%}, max {report.max_abs_rel_error:.1%}. Plain decoding "
              f"{report.plain_tokens_per_s_real:.1f} tokens/s over the batch; {report.plain_cycles_real:.0f} cycles "
              f"(simulated {report.plain_cycles_sim:.0f})."]
    if noise := report.measurement_noise:
        lines += ["", f"The passes' own scatter (each pass's real speedup over its queue's replay): an exact simulator "
                  f"would show mean |error| {noise['exact_model_mean_abs_rel_error']:.1%}, max "
                  f"{noise['exact_model_max_abs_rel_error']:.1%} against runs this noisy; errors below that are noise."]
    if report.live_over_profile:
        lines += ["", "The scored runs against the predicting curves at this batch size (live / profile): "
                  + ", ".join(f"{op} {r:.3f}" for op, r in report.live_over_profile.items()) + "."]
    if co := report.co_timed_refit:
        ratios = ", ".join(f"{op} {r:.3f}" for op, r in co["refit"]["live_over_profile"].items())
        lines += ["", f"Predicted by a second refit, co-timed (its {co['refit']['steps']} runs on the train queue "
                  f"between the scored runs; live / profile {ratios}): mean |error| {co['mean_abs_rel_error']:.1%}, "
                  f"max {co['max_abs_rel_error']:.1%}.", "", "| method | real | simulated (co-timed refit) | error |",
                  "| --- | ---: | ---: | ---: |",
                  *(f"| {r['method']} | {r['speedup_real']:.3f} | {r['speedup_sim']:.3f} | {r['rel_error']:+.1%} |"
                    for r in co["rows"])]
    lines += [f"- warning: {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"

