"""Reading the runs kept in research/runs/, where large JSON files are stored gzipped
(``report.json.gz``, ``profile/profile.json.gz``; research/README.md says which and why).

``read_json(path)`` reads ``path`` or, when only that exists, ``path.gz``. ``profile(path)``
loads a profile folder with ``simspec.sim.profile.load_profile``, unpacking a gzipped
``profile.json`` into a temporary folder first. Both map a path a run recorded before the
notebook moved (``real/RUN/...``, outside ``real/drafters/``) to ``research/runs/RUN/...``."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOVED = ("real/", "research/runs/")  # every real/ run folder but real/drafters and real/teacher-text


def kept(path: str | Path) -> Path:
    """``path`` as it is now: a recorded ``real/RUN/...`` path maps to ``research/runs/RUN/...``."""
    text = str(path)
    old, new = MOVED
    if text.startswith(old) and not text.startswith(("real/drafters", "real/teacher-text")) and not Path(text).exists():
        return Path(new + text[len(old):])
    return Path(text)


def read_json(path: str | Path):
    path = kept(path)
    packed = path.with_name(path.name + ".gz")
    if not path.exists() and packed.exists():
        return json.loads(gzip.decompress(packed.read_bytes()))
    return json.loads(path.read_text())


def profile(path: str | Path):
    from simspec.sim.profile import load_profile

    folder = kept(path)
    folder = folder.parent if folder.name == "profile.json" else folder
    packed = folder / "profile.json.gz"
    if (folder / "profile.json").exists() or not packed.exists():
        return load_profile(folder)
    unpacked = Path(tempfile.mkdtemp(prefix="simspec-profile-")) / folder.name
    unpacked.mkdir()
    (unpacked / "profile.json").write_bytes(gzip.decompress(packed.read_bytes()))
    return load_profile(unpacked)
