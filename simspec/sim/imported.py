"""Latency curves measured in another engine (``calibrate --import-curves FILE``), numpy only.

A server with CUDA graphs and fused kernels has other curves than simspec's engine, and the best
tree depends on them. A curves file of what a user measured, in simspec's operating points,
becomes an ``imported`` profile: fitted like a measured one, marked IMPORTED in every report.

JSON (``schema``: ``simspec-curves``, ``schema_version``: 1)::

    {"schema": "simspec-curves", "schema_version": 1,
     "device": "NVIDIA H100 80GB HBM3",                 # required
     "engine": {"name": "sglang", "version": "0.5.3"},  # required; "settings" optional
     "dtype": "bf16", "target": "...", "draft": "...",  # optional
     "samples": [{"kind": "verify", "n": 8, "context": 1024, "seconds": [0.0071, 0.0072]}, ...]}

CSV: a header ``kind,n,context,seconds`` (one row per timing; rows of the same point are its
repeats), metadata in ``# key: value`` lines before it (``device``, ``engine``,
``engine_version``, optional ``engine_settings``, ``dtype``, ``target``, ``draft``).

Kinds and their axes are simspec's own (``simspec.sim.costmodel``); verify and draft are required.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from simspec.errors import SimspecError
from simspec.sim.costmodel import KINDS
from simspec.sim.profile import sample_record

CURVES_SCHEMA = "simspec-curves"
CURVES_VERSION = 1
META_KEYS = ("device", "engine", "engine_version", "engine_settings", "dtype", "target", "draft")
FIX = "see the curves schema in docs/calibration.md#curves-from-another-engine"


def _bad(file: Path, why: str) -> SimspecError:
    return SimspecError(f"curves {file}: {why}; {FIX}")


def _read_csv(file: Path, text: str) -> dict:
    lines = text.splitlines()
    body = [line for line in lines if not line.lstrip().startswith("#")]
    pairs = [line.lstrip()[1:].split(":", 1) for line in lines if line.lstrip().startswith("#") and ":" in line]
    meta = {key.strip(): value.strip() for key, value in pairs if key.strip() in META_KEYS}
    reader = csv.DictReader(io.StringIO("\n".join(body)))
    if reader.fieldnames is None or [f.strip() for f in reader.fieldnames] != ["kind", "n", "context", "seconds"]:
        raise _bad(file, "a CSV file needs the header kind,n,context,seconds")
    grouped: dict[tuple, list] = {}
    for number, row in enumerate(reader, start=2):
        try:
            key = (row["kind"].strip(), int(row["n"]), int(row["context"]))
            grouped.setdefault(key, []).append(float(row["seconds"]))
        except (TypeError, ValueError, AttributeError):
            raise _bad(file, f"data row {number - 1} is not kind,n,context,seconds with integer n and context "
                             f"and a number of seconds") from None
    engine = {"name": meta.pop("engine", None), "version": meta.pop("engine_version", None)}
    if "engine_settings" in meta:
        engine["settings"] = meta.pop("engine_settings")
    samples = [{"kind": k, "n": n, "context": c, "seconds": s} for (k, n, c), s in grouped.items()]
    return {"schema": CURVES_SCHEMA, "schema_version": CURVES_VERSION, **meta, "engine": engine, "samples": samples}


def load_curves(path: str | Path) -> tuple[dict, list[dict]]:
    """(provenance, latency samples) of a curves file, JSON or CSV; one error line for anything unusable."""
    file = Path(path)
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise SimspecError(f"no curves file at {file}: check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(file, f"unreadable ({exc.__class__.__name__})") from None
    if file.suffix.lower() == ".csv":
        blob = _read_csv(file, text)
    else:
        try:
            blob = json.loads(text)
        except ValueError as exc:
            raise _bad(file, f"not JSON ({exc.__class__.__name__})") from None
    if (not isinstance(blob, dict) or blob.get("schema") != CURVES_SCHEMA
            or blob.get("schema_version") != CURVES_VERSION):
        raise _bad(file, f"not a {CURVES_SCHEMA} v{CURVES_VERSION} file")
    device, engine = blob.get("device"), blob.get("engine")
    if not isinstance(device, str) or not device.strip():
        raise _bad(file, "field 'device' (the GPU or CPU the curves were measured on) is missing")
    if not isinstance(engine, dict) or not all(isinstance(engine.get(k), str) and engine[k]
                                               for k in ("name", "version")):
        raise _bad(file, "field 'engine' needs a 'name' and a 'version' (the engine that was timed)")
    raw = blob.get("samples")
    if not isinstance(raw, list) or not raw:
        raise _bad(file, "field 'samples' must be a non-empty list")
    samples = []
    for i, s in enumerate(raw):
        ok = isinstance(s, dict) and s.get("kind") in KINDS and all(
            isinstance(s.get(k), int) and not isinstance(s.get(k), bool) for k in ("n", "context"))
        seconds = s.get("seconds") if isinstance(s, dict) else None
        seconds = [seconds] if isinstance(seconds, (int, float)) else seconds
        if not ok or not isinstance(seconds, list) or not seconds or not all(
                isinstance(x, (int, float)) and np.isfinite(x) and x > 0 for x in seconds):
            raise _bad(file, f"sample {i} must have a kind ({', '.join(KINDS)}), integer n and context, and positive "
                             f"seconds")
        if s["n"] < 1 or s["context"] < 0:
            raise _bad(file, f"sample {i} has n < 1 or a negative context")
        samples.append(sample_record(s["kind"], s["n"], s["context"], seconds))
    missing = [k for k in ("verify", "draft") if k not in {s["kind"] for s in samples}]
    if missing:
        raise _bad(file, f"no {' or '.join(missing)} samples, which the cost model needs")
    meta = {"device": device.strip(),
            "engine": {k: v for k, v in engine.items() if k in ("name", "version", "settings")},
            **{k: blob[k] for k in ("dtype", "target", "draft") if isinstance(blob.get(k), str)}}
    return meta, samples


def runtime_label(meta: dict) -> str:
    """What a profile's curves time, in one phrase (``runtime`` in profiles and reports)."""
    engine = meta["engine"]
    settings = f" ({engine['settings']})" if engine.get("settings") else ""
    return f"{engine['name']} {engine['version']}{settings}"
