"""Drafter fingerprints: traces remember which weights drafted them, and a drafter retrained
under the same name is refused where those traces would describe it."""

from __future__ import annotations

import pytest

from simspec.errors import SimspecError
from simspec.fingerprint import check_fingerprint, drafter_fingerprint


def head(folder, weights: bytes = b"\x01" * 64):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def test_the_fingerprint_follows_weights_and_config_not_cards(tmp_path):
    folder = head(tmp_path / "h")
    first = drafter_fingerprint(str(folder))
    assert first == drafter_fingerprint(str(folder)) and len(first) == 16
    (folder / "README.md").write_text("a new model card")
    (folder / "simspec.json").write_text("{}")
    assert drafter_fingerprint(str(folder)) == first  # provenance and cards may be rewritten
    head(folder, b"\x02" * 64)
    retrained = drafter_fingerprint(str(folder))
    assert retrained != first
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 8}')
    assert drafter_fingerprint(str(folder)) not in (first, retrained)


def test_drafters_made_from_the_target_and_hub_names():
    assert drafter_fingerprint("target-layers:6") != drafter_fingerprint("target-layers:4")
    assert drafter_fingerprint("no/such-folder-or-hub-id") is None


def test_a_retrained_drafter_is_refused_in_one_line(tmp_path):
    folder = head(tmp_path / "h")
    recorded = drafter_fingerprint(str(folder))
    check_fingerprint(recorded, str(folder), "traces T")  # the same weights pass
    check_fingerprint(None, str(folder), "traces T")  # traces from before fingerprints: unchecked
    head(folder, b"\x03" * 64)
    with pytest.raises(SimspecError, match=f"traces T was recorded with drafter .* of fingerprint {recorded}"):
        check_fingerprint(recorded, str(folder), "traces T")
