"""Where the shipped artifacts live: the demo's drafters, profile, traces and policies.

In a source checkout they are the repository's own folders (``real/drafters/``,
``calibration/``, ``policies/``). A built wheel carries copies of them inside the package
(``simspec/_shipped/``, laid out the same way, see ``setup.py``), so a non-editable install
run from any directory finds them too. ``$SIMSPEC_SHIPPED`` points elsewhere (a folder with
the same layout).

A path the user names is always taken as given when it exists; only a relative path that
does not exist here is looked up among the shipped artifacts (so the defaults
``calibration/cpu-demo`` and ``policies/ltd-cpu-demo`` work from any directory).
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# The folders a shipped root holds (the checkout's root, or the wheel's copy).
SHIPPED_FOLDERS = ("calibration", "policies", "real/drafters")


def shipped_root() -> Path | None:
    """The folder holding the shipped artifacts, or None when this install has none."""
    override = os.environ.get("SIMSPEC_SHIPPED")
    candidates = [Path(override)] if override else [_PACKAGE.parent, _PACKAGE / "_shipped"]
    for root in candidates:
        if (root / "real" / "drafters").is_dir() and (root / "calibration").is_dir():
            return root
    return None


def locate(path: str | Path) -> Path:
    """``path`` itself when it exists (or is absolute); else its shipped copy when there is
    one; else ``path`` unchanged, for the caller to report as missing."""
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    root = shipped_root()
    if root is not None and (root / path).exists():
        return root / path
    return path


def shipped_drafter(name: str) -> Path | None:
    """The shipped drafter folder called ``name`` (``eagle``, ``lm``), if there is one."""
    root = shipped_root()
    if root is None or "/" in name or not name:
        return None
    folder = root / "real" / "drafters" / name
    return folder if (folder / "config.json").is_file() else None


def missing_hint() -> str:
    """What to tell a user whose install lacks the shipped artifacts."""
    return ("this simspec install has no shipped artifacts: run from a simspec checkout, install the wheel "
            "(`pip install simspec-*.whl`), or set $SIMSPEC_SHIPPED to a folder holding calibration/, "
            "policies/ and real/drafters/")
