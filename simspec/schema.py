"""Typed artifacts: each JSON artifact's fields are a frozen dataclass (a ``Record``), read and checked
by one checker from its annotations (``str``, ``int``, ``float``: an int too, not NaN, ``bool``,
``dict``, ``list``, ``Literal``, a nested ``Record``, ``list[Record]``; ``X | None``: optional).
``parse`` raises one ``SimspecError`` line naming the file, the dotted field, what it must be (or a
field's ``metadata={"what": ...}``), what was found, and what to do.

A record keeps the object it was read from (``raw``): writing it back gives the same bytes, and
fields this version does not name travel along untouched. Not pydantic or msgspec: the errors
must read as simspec's one-line messages, and the simulator must import with numpy alone."""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any, ClassVar, Literal, Union

from simspec.errors import _MISSING, _NAMES, SimspecError, _found, _is, describe, field_error, read_json, require_schema


@dataclass(frozen=True)
class Record:
    """Base of every typed artifact record (see the module's docstring)."""

    raw: dict = field(default_factory=dict, repr=False, compare=False, kw_only=True)

    @classmethod
    def parse(cls, blob: Any, file, fix: str, prefix: str = ""):
        """The record in ``blob``, checked field by field; one ``SimspecError`` line otherwise."""
        if not isinstance(blob, dict):
            raise SimspecError(f"{file}: {f'field {prefix[:-1]!r}' if prefix else 'it'} must be an object "
                               f"(found {describe(blob)}): {fix}")
        values = {name: _read(blob, name, kind, optional, what, default, file, fix, prefix)
                  for name, (kind, optional, what, default) in _fields(cls).items()}
        return cls(**values, raw=blob)

    @classmethod
    def of(cls, blob: dict):
        """A record from an object simspec itself built (a bug, not the user's, if it is wrong)."""
        return cls.parse(blob, f"<{cls.__name__}>", "this is a bug in simspec")

    def to_json(self) -> dict:
        """The object it was read from (a copy): what writing it back writes."""
        return dict(self.raw)

    def with_(self, **changes):
        """A copy with ``changes`` to named (or unnamed) fields, in the record and its object."""
        return type(self).of({**self.raw, **{k: _jsonable(v) for k, v in changes.items()}})

    def extra(self, name: str, default=None):
        """A field this record does not declare (informational ones such as ``machine``)."""
        if name in _fields(type(self)):
            raise AttributeError(f"{type(self).__name__}.{name} is declared: read the attribute")
        return self.raw.get(name, default)


@dataclass(frozen=True, kw_only=True)
class Artifact(Record):
    """A record stored as a file with a schema name and version (``SCHEMA``, ``VERSIONS``)."""

    SCHEMA: ClassVar[str] = ""
    VERSIONS: ClassVar[tuple[int, ...]] = (1,)

    @classmethod
    def read(cls, file, what: str, missing: str, fix: str):
        """The artifact in JSON ``file`` (missing: the error ``missing``; wrong: one naming ``fix``)."""
        return cls.check(read_json(file, what, missing, fix), file, fix)

    @classmethod
    def check(cls, blob: dict, file, fix: str, leave: tuple[str, ...] = ()):
        """The artifact in an object read from ``file``; keys in ``leave`` (bulk data) stay out of the record."""
        version = blob.get("schema_version")
        require_schema(blob, cls.SCHEMA, version if version in cls.VERSIONS else cls.VERSIONS[-1], file, fix)
        return cls.parse({k: v for k, v in blob.items() if k not in leave}, file, fix)


def _jsonable(value):
    return value.to_json() if isinstance(value, Record) else value


_NONE = type(None)


@cache
def _fields(cls) -> dict[str, tuple]:
    """name -> (kind, optional, what, default factory or None) for each checked field of ``cls``."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        if f.name == "raw":
            continue
        kind, optional = hints[f.name], False
        if typing.get_origin(kind) in (Union, types.UnionType):
            args = [a for a in typing.get_args(kind) if a is not _NONE]
            optional = len(args) < len(typing.get_args(kind))
            kind = args[0] if len(args) == 1 else tuple(args)
        # a factory, called per record: a shared default list would be one list for every record
        default = (lambda value=f.default: value) if f.default is not MISSING else (
            f.default_factory if f.default_factory is not MISSING else None)
        out[f.name] = (kind, optional or default is not None, f.metadata.get("what"), default)
    return out


def _read(blob: dict, name: str, kind, optional: bool, what, default, file, fix: str, prefix: str):
    value = blob.get(name, _MISSING)
    dotted = prefix + name
    if value is _MISSING or value is None:
        if optional:
            return None if default is None else default()
        _fail(file, dotted, what or _want(kind), value, fix)
    origin = typing.get_origin(kind)
    if origin is Literal:
        if value not in typing.get_args(kind):
            _fail(file, dotted, what or _want(kind), value, fix, found=repr(value))
        return value
    if isinstance(kind, type) and is_dataclass(kind) and issubclass(kind, Record):
        if not isinstance(value, dict):
            _fail(file, dotted, what or _want(kind), value, fix)
        return kind.parse(value, file, fix, prefix=f"{dotted}.")
    if origin is list:
        (item,) = typing.get_args(kind) or (Any,)
        if not isinstance(value, list):
            _fail(file, dotted, what or "a list", value, fix)
        if isinstance(item, type) and issubclass(item, Record):
            return [item.parse(v, file, fix, prefix=f"{dotted}[{i}].") for i, v in enumerate(value)]
        return value
    base = origin or kind
    if not _is(value, base):
        _fail(file, dotted, what or _want(base), value, fix)
    return value


def _want(kind) -> str:
    """What a value of ``kind`` is, in the user's words ("an integer", "a or b", "an object")."""
    if typing.get_origin(kind) is Literal:
        *most, last = map(str, typing.get_args(kind))
        return f"{', '.join(most)} or {last}" if most else last
    if isinstance(kind, type) and issubclass(kind, Record):
        return "an object"
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_NAMES.get(typing.get_origin(k) or k, getattr(k, "__name__", str(k))) for k in kinds)


def _fail(file, name: str, want: str, value, fix: str, found: str | None = None):
    raise field_error(file, name, want, f"found {found}" if found else _found(value), fix)
