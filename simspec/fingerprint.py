"""Drafter fingerprints: which weights a recording was made with. A retrained drafter keeps its
name; the fingerprint tells the two apart (torch-free: checks run before models load)."""

from __future__ import annotations

from pathlib import Path

from simspec.errors import SimspecError
from simspec.shipped import shipped_drafter

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".npz")


def drafter_fingerprint(ref: str) -> str | None:
    """A short hash of the drafter ``ref``'s config and weight files (the reference itself for drafters
    made from the target); None for a reference that is not a folder here (a hub id)."""
    import hashlib

    if ref == "target" or ref.startswith("target-layers:"):
        return hashlib.sha256(ref.encode()).hexdigest()[:16]
    path = shipped_drafter(ref) or Path(ref)
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(path.iterdir()):
        if file.is_file() and (file.name == "config.json" or file.suffix in WEIGHT_SUFFIXES):
            digest.update(file.name.encode())
            with file.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


def check_fingerprint(recorded: str | None, ref: str, what: str) -> None:
    """Refuses drafter ``ref`` when ``what`` (traces, a profile) was recorded with other weights under
    the same name (``recorded`` None: not checkable)."""
    if recorded is None:
        return
    here = drafter_fingerprint(ref)
    if here is not None and here != recorded:
        raise SimspecError(f"{what} was recorded with drafter {ref!r} of fingerprint {recorded}, and {ref!r} here is "
                           f"{here} (retrained or replaced): record traces with this drafter (`simspec calibrate`), "
                           "or restore the drafter they were recorded with")
