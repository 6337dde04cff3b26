"""Where simspec keeps derived files (parsed datasets, converted models), and how it writes
artifacts so that an interrupted run never leaves half of one behind."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """``$SIMSPEC_CACHE``, or ``~/.cache/simspec``."""
    return Path(os.environ.get("SIMSPEC_CACHE") or Path.home() / ".cache" / "simspec").expanduser()


@contextmanager
def atomic_directory(final: Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling of ``final`` to fill, renamed into place on success (with ``replace``
    over an existing ``final``)."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would survive the rename: an artifact is ordinary data
    try:
        yield tmp
        if replace and final.exists():
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_file(path: Path, write) -> None:
    """``write(file)`` (a binary file) into a temporary sibling of ``path``, renamed over it once complete:
    a concurrent reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 (less the umask) gives the file the mode a plain open would; mkstemp's 0600 would
    # survive the rename and hide a figure from other users
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_out(out: Path | str, force: bool = False, flag: str = "--out") -> Path:
    """The output folder ``out``, checked before any work (it is renamed into place at the end): it must
    not exist (unless ``force``) and its nearest existing parent must take a new folder."""
    from simspec.errors import SimspecError

    out = Path(out)
    if out.exists() and not force:
        raise SimspecError(f"{out} exists: choose another {flag} or pass --force")
    parent = out.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:  # os.access says yes to root on read-only and pseudo file systems: try it
        os.rmdir(tempfile.mkdtemp(dir=parent, prefix=f".{out.name}.", suffix=".check"))
    except OSError:
        raise SimspecError(f"cannot write {out}: no new folder can be made in {parent}; "
                           f"choose another {flag}") from None
    return out
