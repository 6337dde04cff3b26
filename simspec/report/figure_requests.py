"""What the ``simspec plot`` verbs are asked for (``simspec.report.figures`` draws them): one
small request per figure, each flag's default and help declared once, as every verb's are."""

from __future__ import annotations

from dataclasses import dataclass

from simspec import flags
from simspec.flags import opt


@dataclass(frozen=True, kw_only=True)
class CurvesPlot:
    profile: str = flags.profile()
    out: str = flags.out("figures")
    force: bool = flags.force()


@dataclass(frozen=True, kw_only=True)
class SurfacePlot:
    profile: str = flags.profile()
    split: str = flags.split()
    max_new_tokens: int | None = flags.max_new_tokens(None, min=2)
    out: str = flags.out("figures")
    force: bool = flags.force()


@dataclass(frozen=True, kw_only=True)
class TrainingPlot:
    policy: str = opt(help="A policy folder (policies/NAME).")
    out: str = flags.out("figures")
    force: bool = flags.force()


@dataclass(frozen=True, kw_only=True)
class ValidationPlot:
    report: str = opt(help="A validate --real run folder (real/RUN) or its report.json.")
    out: str | None = flags.out()
    method: str | None = opt(None, "Also draw this method's action map (learned policies' are always drawn).")
    force: bool = flags.force()
