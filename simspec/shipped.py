"""Where the shipped artifacts live: the demo's drafters, profiles, traces and policies.

In a source checkout (an editable install) they are the repository's own folders
(``real/drafters/``, ``calibration/``, ``policies/``). A built wheel (``pip install .``, or
``pip wheel .`` then ``pip install simspec-*.whl``) carries copies of them inside the package,
``simspec/_shipped/``, laid out the same way (``setup.py`` says which files: what inference
reads, no training checkpoints or logs), so a non-editable install run from any directory
finds them too. ``$SIMSPEC_SHIPPED`` names another folder with that layout, and then only it.

A path the user names is always taken as given when it exists; only a relative path that does
not exist here is looked up among the shipped artifacts (so ``--profile calibration/cpu-demo``,
``--policies policies/ltd-cpu-demo`` and ``--draft eagle`` work from any directory). When the
install has no shipped artifacts at all, asking for one is a one-line error saying what is
missing and how to get it (``missing_hint``).
"""

from __future__ import annotations

import os
from pathlib import Path

from simspec.errors import SimspecError

_PACKAGE = Path(__file__).resolve().parent
# The folders a shipped root holds (the checkout's root, or the wheel's copy).
SHIPPED_FOLDERS = ("calibration", "policies", "real/drafters")
# Drafters every install ships, by the name ``--draft`` takes.
SHIPPED_DRAFTERS = {"eagle": "eagle3", "lm": "lm"}  # name -> the train-draft --kind that makes it
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
    """``path`` itself when it exists (or is absolute); else its shipped copy when there is
    one; else ``path`` unchanged, for the caller to report as missing. A relative path under
    ``calibration/``, ``policies/`` or ``real/drafters/`` in an install with no shipped
    artifacts is a SimspecError naming it and how to get them."""
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
    """The shipped drafter folder called ``name`` (``eagle``, ``lm``, or another folder under
    ``real/drafters/``), if there is one. For a name in SHIPPED_DRAFTERS that is not a local
    path either, a missing drafter is a SimspecError saying how to get it."""
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
