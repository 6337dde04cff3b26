"""Where the shipped artifacts live (drafters, profiles, traces, policies): the checkout's own
``real/drafters/``, ``calibration/`` and ``policies/``, or in a built wheel their copies in
``simspec/_shipped/`` (``setup.py`` picks what inference reads); ``$SIMSPEC_SHIPPED`` names another
folder with that layout, and then only it. A path the user names that exists is taken as given;
only a relative one that does not is looked up there, so ``--draft eagle`` works from any directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from simspec.errors import SimspecError

_PACKAGE = Path(__file__).resolve().parent
SHIPPED_FOLDERS = ("calibration", "policies", "real/drafters")  # in a shipped root (a checkout, or the wheel's copy)
SHIPPED_DRAFTERS = {"eagle": "eagle3", "lm": "lm"}  # every install's: --draft name -> the train-draft --kind making it
ENV = "SIMSPEC_SHIPPED"


def _is_root(root: Path) -> bool:
    return (root / "real" / "drafters").is_dir() and (root / "calibration").is_dir()


def shipped_root() -> Path | None:
    """The folder holding the shipped artifacts, or None when this install has none."""
    override = os.environ.get(ENV)
    candidates = [Path(override)] if override else [_PACKAGE.parent, _PACKAGE / "_shipped"]
    return next((root for root in candidates if _is_root(root)), None)


def _names_shipped_folder(path: Path) -> bool:
    return any(path.parts[:len(Path(f).parts)] == Path(f).parts for f in SHIPPED_FOLDERS)


def locate(path: str | Path) -> Path:
    """``path`` itself when it exists (or is absolute); else its shipped copy; else ``path`` unchanged,
    for the caller to report (a SimspecError at once for a shipped folder's path with none shipped)."""
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    root = shipped_root()
    if root is not None and (root / path).exists():
        return root / path
    if root is None and _names_shipped_folder(path):
        raise SimspecError(f"{path} is not here: {missing_hint()}")
    return path


def shipped_drafter(name: str) -> Path | None:
    """The shipped drafter folder ``name`` under ``real/drafters/``, if there is one; a missing one of
    SHIPPED_DRAFTERS (not a local path either) is a SimspecError saying how to get it."""
    if not name or "/" in name or name in (".", ".."):
        return None
    root = shipped_root()
    folder = None if root is None else root / "real" / "drafters" / name
    if folder is not None and (folder / "config.json").is_file():
        return folder
    if name in SHIPPED_DRAFTERS and not Path(name).exists():
        if folder is None:
            raise SimspecError(f"the shipped drafter {name!r} is not here: {missing_hint()}")
        raise SimspecError(f"the shipped drafter {name!r} is missing ({folder / 'config.json'} does not exist): "
                           f"restore it, or train it again with `simspec train-draft --kind {SHIPPED_DRAFTERS[name]} "
                           f"--out {folder} --force`")
    return None


def missing_hint() -> str:
    """What to tell a user whose install lacks the shipped artifacts (one line)."""
    override = os.environ.get(ENV)
    if override:
        return (f"${ENV}={override} holds no shipped artifacts (calibration/ and real/drafters/): point it at a "
                "folder with simspec's calibration/, policies/ and real/drafters/, or unset it")
    return ("this simspec install has no shipped artifacts (calibration/, policies/, real/drafters/): install "
            "simspec from a checkout or its wheel (`pip install .` or `pip install simspec-*.whl`, which carry "
            f"them), run from a simspec checkout, or set ${ENV} to a folder holding them")
