"""What the ``simspec plot`` verbs are asked for (``simspec.report.figures`` draws them): one
small request per figure, each flag's default and help declared once, as every verb's are."""

from __future__ import annotations

from dataclasses import dataclass

from simspec import flags
from simspec.flags import opt

FOLDER = "Folder for the figure."
FORCE = "Replace an existing figure of the same name."


@dataclass(frozen=True, kw_only=True)
class CurvesPlot:
    profile: str = opt(help="A profile folder (calibration/NAME).")
    out: str = opt("figures", FOLDER)
    force: bool = opt(False, FORCE)


@dataclass(frozen=True, kw_only=True)
class SurfacePlot:
    profile: str = opt(help="A profile folder with traces.")
    split: str = flags.split()
    max_new_tokens: int | None = opt(None, "Token budget per prompt (default: everything recorded).", min=2)
    out: str = opt("figures", FOLDER)
    force: bool = opt(False, FORCE)


@dataclass(frozen=True, kw_only=True)
class TrainingPlot:
    policy: str = opt(help="A policy folder (policies/NAME).")
    out: str = opt("figures", FOLDER)
    force: bool = opt(False, FORCE)


@dataclass(frozen=True, kw_only=True)
class ValidationPlot:
    report: str = opt(help="A validate --real run folder (real/RUN) or its report.json.")
    out: str | None = opt(None, "Folder for the figures (default: the run folder).")
    method: str | None = opt(None, "Also draw this method's action map (learned policies' are always drawn).")
    force: bool = opt(False, FORCE)
