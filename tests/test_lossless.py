"""The lossless check's tie rule: float-order ties in fp32, a few ulps of the logit in bf16/fp16."""

from __future__ import annotations

import torch

from simspec.engine.lossless import NEAR_TIE, TIE_ULPS, Divergence, tie_tolerance


def test_tolerance_is_the_dtypes_resolution():
    assert tie_tolerance(20.0, torch.float32) == NEAR_TIE
    assert tie_tolerance(20.0, torch.bfloat16) == TIE_ULPS * 0.125  # bf16 spacing in [16, 32) is 2^-3
    assert tie_tolerance(-12.0, torch.bfloat16) == TIE_ULPS * 0.0625
    assert tie_tolerance(20.0, torch.float16) == TIE_ULPS * 2 ** -10 * 16


def test_a_gap_beyond_the_tolerance_is_a_bug():
    tol = tie_tolerance(20.0, torch.bfloat16)
    assert Divergence(3, 1, 2, tol, tol).near_tie
    assert not Divergence(3, 1, 2, tol + 0.125, tol).near_tie
    assert not Divergence(3, 1, 2, 0.5, tie_tolerance(20.0, torch.float32)).near_tie  # fp32: 0.5 is no tie
    assert Divergence(3, 1, 2, 5e-5).near_tie
    record = {"position": 3, "speculative_token": 1, "greedy_token": 2, "top2_gap": 0.25, "prompt": "p"}
    assert not Divergence.from_dict(record).near_tie  # reports from before the rule: fp32's tolerance
    assert Divergence.from_dict({**record, "tolerance": 0.5}).near_tie
