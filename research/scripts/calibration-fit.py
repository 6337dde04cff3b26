"""Held-out errors of profiles' cost models, per curve and pooled, as a markdown table:
``python research/scripts/calibration-fit.py PROFILE...`` (docs/results/calibration.md#cost-model-fit-per-runtime)."""

import sys
from pathlib import Path

from runs import read_json

print("| profile | runtime | curve | fit | held out | median | p90 | max |")
print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
for folder in sys.argv[1:]:
    meta = read_json(Path(folder) / "profile.json")
    runtime = meta.get("engine_runtime", "eager")
    for curve, report in meta["fit"].items():
        kept = report.get(report.get("method"), {})
        if "median" not in kept:
            print(f"| {folder} | {runtime} | {curve} | {report.get('method')} | 0 | | | |")
            continue
        print(f"| {folder} | {runtime} | {curve} | {report['method']} | {report['held_out']} | "
              f"{kept['median']:.1%} | {kept['p90']:.1%} | {kept['max']:.1%} |")
    pooled = meta["fit_error"]
    print(f"| {folder} | {runtime} | **pooled** | | {pooled['points']} | **{pooled['median']:.1%}** | "
          f"**{pooled['p90']:.1%}** | |")
