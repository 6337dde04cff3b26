"""User-facing errors, and the JSON checks artifact readers share (``simspec.schema`` reads the typed
fields; ``require`` / ``require_records`` the few a record cannot declare): a wrong-shaped file is
reported by its path and the field at fault, with what to do, never as a Python error."""

from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path


class SimspecError(Exception):
    """An error caused by the user's input; the CLI prints it as one line and exits non-zero."""


_MISSING = object()


def describe(value) -> str:
    """What a JSON value is, for messages: "null", "the string 'x'", "a list of 3", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is(value, kind) -> bool:
    """``isinstance`` for JSON values: a bool is not a number, an int is a float, a float is finite."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False
    if float in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isfinite(value)
    return isinstance(value, kinds)


_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "an object", list: "a list",
          bool: "true or false"}


def read_json(file: Path, what: str, missing: str, fix: str) -> dict:
    """The JSON object in ``file``; a missing file raises ``missing``, a bad one names ``what`` (e.g.
    "profile "), what is wrong, and ``fix``."""
    try:
        raw = Path(file).read_bytes()
        blob = json.loads(gzip.decompress(raw) if str(file).endswith(".gz") else raw)  # a kept run's report.json.gz
    except FileNotFoundError:
        raise SimspecError(missing) from None
    except NotADirectoryError:  # a file named where its folder belongs: no advice to write over that file
        named = next((p for p in Path(file).parents if p.is_file()), Path(file).parent)
        raise SimspecError(f"{named} is a file, not a folder: pass the folder that holds {Path(file).name}") from None
    except (OSError, ValueError, EOFError, zlib.error) as exc:  # the last two: a truncated or corrupt .gz
        raise SimspecError(f"{what}{file} is unreadable ({exc.__class__.__name__}): {fix}") from None
    if not isinstance(blob, dict):
        raise SimspecError(f"{what}{file} is unreadable (it holds {describe(blob)}, not a JSON object): {fix}")
    return blob


def require_schema(blob: dict, schema: str, version: int, file, fix: str, key: str = "schema") -> None:
    """``blob[key]`` is ``schema`` and ``blob[key + "_version"]`` is ``version``."""
    found, found_version = blob.get(key), blob.get(f"{key}_version")
    if found != schema or found_version != version:
        seen = f"{found} v{found_version}" if found is not None else f"no '{key}' field"
        raise SimspecError(f"{file} is not a {schema} v{version} file (found {seen}): {fix}")


def field_error(file, name: str, want: str, seen: str, fix: str) -> SimspecError:
    """The one wording of a bad field: ``{file}: field '{name}' must be {want} ({seen}): {fix}``."""
    return SimspecError(f"{file}: field '{name}' must be {want} ({seen}): {fix}")


def require(blob: dict, field: str, kind, file, fix: str, what: str | None = None, optional: bool = False,
            name: str | None = None):
    """``blob[field]``, which must be of ``kind`` (types; null or absent too when ``optional``); else one
    error naming ``file``, the field (``name`` when nested), what it must be (``what``) and ``fix``."""
    value = blob.get(field, _MISSING) if isinstance(blob, dict) else _MISSING
    if optional and (value is _MISSING or value is None):
        return None
    if not _is(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        want = what or " or ".join(_NAMES.get(k, k.__name__) for k in kinds)
        raise field_error(file, name or field, want, _found(value), fix)
    return value


def _found(value) -> str:
    return "it is missing" if value is _MISSING else f"found {describe(value)}"


def require_records(blob: dict, field: str, keys: dict, file, fix: str, what: str, optional: bool = False):
    """``blob[field]``: a list of objects, each with the ``keys`` (name -> type); else one error."""
    records = require(blob, field, list, file, fix, what=what, optional=optional)
    for i, record in enumerate(records or []):
        if not isinstance(record, dict):
            problem = f"item {i} is {describe(record)}"
        else:
            bad = next((k for k, kind in keys.items() if not _is(record.get(k, _MISSING), kind)), None)
            if bad is None:
                continue
            value = record.get(bad, _MISSING)
            problem = f"item {i} has no '{bad}'" if value is _MISSING else \
                f"item {i} has '{bad}' {describe(value)}, not {_NAMES.get(keys[bad], 'that')}"
        raise field_error(file, field, what, problem, fix)
    return records
