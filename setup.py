"""Packaging of the shipped artifacts (everything else is in pyproject.toml).

A built wheel (``pip install .``, ``pip wheel .``, or a wheel built from the sdist) carries a
copy of the artifacts that inference needs, under ``simspec/_shipped/`` with the repository's
layout (``calibration/…``, ``policies/…``, ``real/drafters/…``); ``simspec.shipped`` finds them
there. Only what the loaders read is copied: profiles, traces, the policies' exported
networks and metadata (plus ``training.csv`` for ``simspec plot training``), and the shipped
drafters' (``eagle``, ``lm``) weights, configs, vocabularies and model cards; no other drafter
folder under ``real/drafters/`` (a research head trained there), SB3/torch training checkpoints,
TensorBoard logs or training histories. An editable install copies nothing: there
``simspec.shipped`` finds the checkout's own folders.
"""

from __future__ import annotations

import os
from glob import glob

from setuptools import setup
from setuptools.command.build_py import build_py

# Paths relative to the repository root (setuptools runs this file from there).
SHIPPED = (
    "calibration/*/profile.json",
    "calibration/*/traces.json",
    "calibration/*/traces.npz",
    "policies/*/policy.json",
    "policies/*/policy.npz",
    "policies/*/training.csv",
    *(f"real/drafters/{name}/{files}" for name in ("eagle", "lm")  # simspec.shipped.SHIPPED_DRAFTERS;
      for files in ("*.json", "*.safetensors", "*.jinja", "README.md")),  # no other head is packed
)
NOT_SHIPPED = {"history.json"}  # a drafter's training curves: nothing reads them at inference
# A training run's work folder (OUT.partial/: its self-distilled text, checkpoints) is no artifact.
WORK_FOLDER = ".partial"
REQUIRED = ("calibration", "policies", "real/drafters")  # a wheel lacking one of these is refused
DESTINATION = os.path.join("simspec", "_shipped")


def shipped_files() -> list[str]:
    files = {path for pattern in SHIPPED for path in glob(pattern)
             if os.path.isfile(path) and os.path.basename(path) not in NOT_SHIPPED
             and not os.path.dirname(path).endswith(WORK_FOLDER)}
    return sorted(path.replace(os.sep, "/") for path in files)


class build_py_with_artifacts(build_py):
    """build_py, plus the shipped artifacts copied into the built package (not in editable mode)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        files = shipped_files()
        absent = [folder for folder in REQUIRED if not any(f.startswith(folder + "/") for f in files)]
        if absent:
            raise SystemExit(f"simspec: no shipped artifacts under {', '.join(absent)}/ in {os.getcwd()}: build the "
                             "wheel from a simspec checkout (or from its sdist)")
        for path in files:
            target = os.path.join(self.build_lib, DESTINATION, path)
            self.mkpath(os.path.dirname(target))
            self.copy_file(path, target, preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if self.editable_mode:
            return outputs
        return outputs + [os.path.join(self.build_lib, DESTINATION, path) for path in shipped_files()]

    def get_source_files(self) -> list[str]:
        # sdist lists these: an sdist carries the artifacts, so a wheel built from it does too
        return super().get_source_files() + shipped_files()


setup(cmdclass={"build_py": build_py_with_artifacts})
