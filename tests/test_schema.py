"""The typed-artifact checker (``simspec.schema``): every shipped artifact reads into its record,
and each kind of bad field is one line naming the file, the dotted field, what it must be and
what was found."""

from __future__ import annotations

import glob
import gzip
import json
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest
from helpers import ROOT

from simspec.errors import SimspecError
from simspec.policies.artifact import PolicyMeta
from simspec.report.validation import ValidationReport
from simspec.schema import Artifact, Record
from simspec.sim.profile import ProfileMeta
from simspec.sim.traces import TraceMeta


@dataclass(frozen=True, kw_only=True)
class Inner(Record):
    width: int
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Outer(Artifact):
    SCHEMA: ClassVar[str] = "test-outer"
    kind: Literal["a", "b"]
    ratio: float = 1.0
    inner: Inner | None = None
    items: list[Inner] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Strict(Outer):
    inner: Inner = field()  # required here, optional in Outer


def _message(blob, cls=Outer) -> str:
    with pytest.raises(SimspecError) as caught:
        cls.check({"schema": "test-outer", "schema_version": 1, **blob}, "f.json", "fix it")
    return str(caught.value)


@pytest.mark.parametrize("blob, expected", [
    ({}, "f.json: field 'kind' must be a or b (it is missing): fix it"),
    ({"kind": "c"}, "f.json: field 'kind' must be a or b (found 'c'): fix it"),
    ({"kind": "a", "ratio": "x"}, "f.json: field 'ratio' must be a number (found the string 'x'): fix it"),
    ({"kind": "a", "ratio": True}, "f.json: field 'ratio' must be a number (found true): fix it"),
    ({"kind": "a", "inner": []}, "f.json: field 'inner' must be an object (found a list of 0): fix it"),
    ({"kind": "a", "inner": {"width": 1.5}}, "f.json: field 'inner.width' must be an integer (found the number 1.5)"),
    ({"kind": "a", "items": [{"width": 1}, {}]}, "f.json: field 'items[1].width' must be an integer (it is missing)"),
])
def test_each_bad_field_is_one_line_naming_it(blob, expected):
    message = _message(blob)
    assert message.startswith(expected) and "\n" not in message


def test_schema_and_version_are_checked_first():
    with pytest.raises(SimspecError, match="is not a test-outer v1 file"):
        Outer.check({"schema": "other", "kind": "zzz"}, "f.json", "fix it")


def test_a_field_made_required_in_a_subclass_is_required():
    assert Outer.check({"schema": "test-outer", "schema_version": 1, "kind": "a"}, "f", "x").inner is None
    assert "field 'inner' must be an object (it is missing)" in _message({"kind": "a"}, Strict)


def test_the_record_keeps_its_object_and_changes_by_copy():
    blob = {"schema": "test-outer", "schema_version": 1, "kind": "a", "inner": {"width": 2}, "later": [1]}
    record = Outer.check(blob, "f", "x")
    assert record.to_json() == blob and record.inner.width == 2 and record.extra("later") == [1]
    changed = record.with_(ratio=2.5)
    assert changed.ratio == 2.5 and record.ratio == 1.0 and changed.to_json()["later"] == [1]
    with pytest.raises(AttributeError, match="declared"):
        record.extra("ratio")
    other = Outer.check({"schema": "test-outer", "schema_version": 1, "kind": "b"}, "f", "x")
    assert record.items == other.items == [] and record.items is not other.items  # a default list each


@pytest.mark.parametrize("pattern, cls", [
    ("calibration/*/profile.json", ProfileMeta), ("calibration/*/traces.json", TraceMeta),
    ("calibration/*/traces/traces.json", TraceMeta), ("policies/*/policy.json", PolicyMeta),
    ("research/runs/*/report.json*", ValidationReport),  # the notebook's runs, most gzipped (research/README.md)
])
def test_every_shipped_artifact_reads_into_its_record(pattern, cls):
    files = glob.glob(str(ROOT / pattern))
    assert files or pattern.endswith("traces/traces.json")
    for file in files:
        blob = json.loads(gzip.decompress(open(file, "rb").read()) if file.endswith(".gz") else open(file).read())
        record = cls.check({k: v for k, v in blob.items() if k != "samples"}, file, "x")
        assert record.to_json() == {k: v for k, v in blob.items() if k != "samples"}
