"""Analytic curves need the pair's shapes, not its weights (`calibrate --gpu h100 --traces-from P`
leaves an 8B target on disk): read from the configs alone they equal what the loaded pair gives,
for every built-in drafter format."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import cli
from test_eagle_public import eagle1_config, eagle1_tensors, eagle3_config, eagle3_tensors, write
from test_speculators import speculators_config

from simspec.engine.eagle import EagleConfig, EagleHead, save_eagle
from simspec.engine.formats import DRAFTER_FORMATS
from simspec.engine.load import load_drafter, resolve_drafter
from simspec.measure.curves import drafter_architecture, pair_shapes, target_architecture

pytestmark = pytest.mark.model
TARGET = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def folders(tmp_path_factory, target):
    root = tmp_path_factory.mktemp("formats")
    speculators = eagle3_tensors(prefix="layers.0.")
    speculators["embed_tokens.weight"] = torch.zeros(49152, 576, dtype=torch.bfloat16)
    head = EagleHead(EagleConfig.for_target(target, draft_vocab=512))
    save_eagle(root / "simspec-eagle", head, torch.arange(512) * 7, {"target": target.name})
    return {"eagle-public (EAGLE-3)": str(write(root / "eagle3", eagle3_config(), eagle3_tensors())),
            "eagle-public (EAGLE-1)": str(write(root / "eagle1", eagle1_config(), eagle1_tensors())),
            "speculators": str(write(root / "speculators", speculators_config(), speculators)),
            "simspec-eagle": str(root / "simspec-eagle"),
            "causal-lm (the shipped draft LM)": "lm", "eagle-public (the shipped head)": "eagle",
            "target": "target", "target-layers": "target-layers:4"}


def test_every_formats_shapes_read_from_configs_equal_the_loaded_pairs(folders, target):
    covered = set()
    for case, ref in folders.items():
        fmt, _ = resolve_drafter(ref)
        covered.add(fmt.name)
        assert case.startswith(fmt.name), (case, fmt.name)
        assert pair_shapes(TARGET, ref) == (target_architecture(target.model.config),
                                           drafter_architecture(load_drafter(ref, target))), case
    assert covered == {f.name for f in DRAFTER_FORMATS.specs()}  # a new format gets a case here


def test_a_config_without_the_shapes_gives_no_guess(tmp_path):
    """pair_shapes says it cannot tell (None); calibrate then loads the pair, whose loader names
    what is wrong."""
    config = eagle3_config()
    del config["intermediate_size"]
    assert pair_shapes(TARGET, str(write(tmp_path / "eagle3", config, eagle3_tensors()))) is None


def test_analytic_curves_for_recorded_traces_load_no_weights(target, tmp_path):
    """No model is loaded: the process's model cache sees no call, hit or miss (the target is
    loaded in this process already, so a load would be a hit)."""
    from simspec.engine.models import _load

    before = _load.cache_info()
    result = cli("calibrate", "--gpu", "h100", "--traces-from", "calibration/cpu-demo", "--quick", "--out",
                 str(tmp_path / "h100"))
    assert result.returncode == 0, result.stderr
    after = _load.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    shapes = json.loads((tmp_path / "h100" / "profile.json").read_text())["architecture"]
    assert shapes == {"target": target_architecture(target.model.config).to_dict(),
                      "draft": drafter_architecture(load_drafter("eagle", target)).to_dict()}
