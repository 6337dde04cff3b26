"""Reading the runs kept in research/runs/, where large JSON files are stored gzipped
(``report.json.gz``, ``profile/profile.json.gz``; research/README.md says which and why).

``read_json(path)`` reads ``path`` or, when only that exists, ``path.gz``. ``profile(path)``
loads a profile folder with ``simspec.sim.profile.load_profile``, unpacking a gzipped
``profile.json`` into a temporary folder first. Both map a path a run recorded before the
notebook moved (``real/RUN/...``, outside ``real/drafters/``) to ``research/runs/RUN/...``.
``load_streams(path)`` rebuilds the streams a ``simspec load --live`` JSON served, for the replay."""

from __future__ import annotations

import gzip
import json
import re
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


def load_streams(path: str, profile_path: str | None = None):
    """A ``simspec load --live`` JSON (``path``, gzipped or not) and its streams rebuilt as it drew
    them (Poisson, same rates, duration and seed, over the held-out prompts), each with the method
    that served it and that method's decision charge: ``(run, profile, held-out traces, [(row,
    stream, method, charge)])``, the method None for plain decoding. ``profile_path``: another
    profile of the same traces (default: the run's own)."""
    import numpy as np

    from simspec.sim.evaluate import build_baselines, decision_charges, split_traces
    from simspec.sim.load import DecisionCharge
    from simspec.sim.profile import load_profile
    from simspec.sim.stream import poisson

    run = json.load(gzip.open(path) if str(path).endswith(".gz") else open(path))
    profile = load_profile(profile_path or run["profile"])
    traces = profile.traces()
    held, train = split_traces(traces, run["split"]), split_traces(traces, "train")
    charges = decision_charges(profile.meta)
    # the JSON names each method as it printed it; a static tree's name gives back its --baselines spec
    names = list(dict.fromkeys(r["method"] for r in run["rows"]))[1:]
    specs = [re.sub(r"^static\(D=(\d+),W=\d+,V=(\d+)\)$", r"static:\1,\2", n) for n in names]
    methods = [None, *build_baselines(specs, train, profile.cost, run["max_new_tokens"])]
    streams = []
    for i, row in enumerate(run["rows"]):
        meta, method = row["stream"], methods[i % len(methods)]
        stream = poisson(meta["rate"], meta["duration_s"], np.arange(held.n_prompts), meta["seed"])
        streams.append((row, stream, method, charges.get(method.family, DecisionCharge.flat(0.0)) if method else 0.0))
    return run, profile, held, streams
