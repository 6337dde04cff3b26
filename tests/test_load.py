"""Replay under load (``simspec.sim.load``) and its request streams (``simspec.sim.stream``): the
queue rules with arrival times, latencies read off the clock, pricing at the batch a cycle runs
at, the policy told the batch and the queue, and bad streams refused in one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from helpers import cost_model, random_traces

from simspec.errors import SimspecError
from simspec.policies import StaticPolicy
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.load import replay_load
from simspec.sim.replay import replay
from simspec.sim.stream import Stream, bursty, poisson, read_stream


def batched_cost(batches=(1, 2, 4), flat: bool = False) -> CostModel:
    """``cost_model``'s curves measured again at each batch size: dearer with B unless ``flat``."""
    points = []
    for b in batches:
        k = 1.0 if flat else 1 + 0.3 * (b - 1)
        points += ([Point("verify", n, c, k * (0.05 + 2e-3 * n + 1e-5 * c), b) for c in (32, 512) for n in (1, 8, 64)]
                   + [Point("draft", n, c, k * (0.004 + 3e-4 * n), b) for c in (32, 512) for n in (1, 4, 16)]
                   + [Point("greedy", 1, c, k * (0.05 + 1e-5 * c), b) for c in (32, 512)])
    return CostModel(points + [Point("prefill", n, 0, 0.01 * n) for n in (16, 128)])


@pytest.mark.parametrize("policy", [None, StaticPolicy(4, 2, 6)], ids=["plain", "static"])
def test_a_stream_arriving_at_once_is_the_queue_replay_at_its_batch(policy):
    """Every request waiting at time 0 is the queue ``replay`` decodes at batch B; where every
    batch size costs the same (so the bucket a cycle runs at cannot matter) its clock ends where
    the queue's time does, in the same cycles."""
    traces, cost = random_traces(3), batched_cost(flat=True)
    n = traces.n_prompts
    queue = replay(traces, cost, policy or StaticPolicy(1, 2, 1), 30, batch=4)
    served = replay_load(traces, cost, policy, Stream(np.zeros(n), np.arange(n)), 4, 30)
    total = (queue.seconds if policy else queue.greedy_seconds) + queue.prefill_seconds
    assert served.finished.max() == pytest.approx(float(total[0]), rel=1e-12)
    assert served.cycles == (queue.cycles if policy else queue.plain_cycles)[0]
    assert served.tokens.sum() - n == queue.tokens.sum()


def test_requests_far_apart_are_served_alone_at_batch_1():
    """With an hour between arrivals each request has the engine to itself: its first token
    comes out of its own prefill, and the rest takes its batch-1 replay's time, priced at batch 1
    however large the maximum batch."""
    traces, cost = random_traces(4), batched_cost()
    n, policy = traces.n_prompts, StaticPolicy(3, 2, 4)
    served = replay_load(traces, cost, policy, Stream(np.arange(n) * 3600.0, np.arange(n)), 4, 30)
    alone = replay(traces, cost, StaticPolicy(3, 2, 4), 30)
    assert np.allclose(served.ttft, alone.prefill_seconds, rtol=1e-12)
    assert np.allclose(served.e2e - served.ttft, alone.seconds, rtol=1e-12)
    assert np.allclose(served.tpot * np.maximum(served.tokens - 1, 1), alone.seconds, rtol=1e-12)


def test_a_request_waits_for_a_free_row_and_its_first_token_says_so():
    """One row and every request at time 0: each is admitted when the one before finishes, so
    its time to first token is the previous finish plus its own prefill. Four rows: the first
    four are prefilled one after the other before the first cycle."""
    traces, cost = random_traces(5), batched_cost()
    n = traces.n_prompts
    served = replay_load(traces, cost, StaticPolicy(3, 2, 4), Stream(np.zeros(n), np.arange(n)), 1, 20)
    prefill = cost.prefill(traces.prompt_lengths)
    assert served.ttft[0] == pytest.approx(prefill[0])
    assert np.allclose(served.first_token[1:], served.finished[:-1] + prefill[1:], rtol=1e-12)
    assert np.all(np.diff(served.ttft) > 0)
    four = replay_load(traces, cost, StaticPolicy(3, 2, 4), Stream(np.zeros(n), np.arange(n)), 4, 20)
    assert np.allclose(four.ttft[:4], np.cumsum(prefill[:4]), rtol=1e-12)


def test_speculation_pays_less_as_the_batch_fills():
    """On curves dearer at larger batches, a static tree's time per output token over plain
    decoding's is better at a light rate than a saturating one: the cost of a cycle follows the
    batch it runs at, and the same stream is served both ways."""
    traces, cost = random_traces(6, n_prompts=7), batched_cost()

    def tpot_ratio(rate: float) -> float:
        stream = poisson(rate, 300, np.arange(traces.n_prompts), seed=2)
        tree, plain = (replay_load(traces, cost, p, stream, 4, 40) for p in (StaticPolicy(4, 2, 8), None))
        return float(np.median(tree.tpot) / np.median(plain.tpot))

    assert tpot_ratio(0.02) < tpot_ratio(5.0)


class Recording(StaticPolicy):
    """A static tree that notes the batch size and the queue it is told before each cycle."""

    def __init__(self) -> None:
        super().__init__(3, 2, 4)
        self.seen: list[tuple[int, int]] = []

    def plan_batch(self, rows, context):
        self.seen.append((self.batch_size, self.waiting))
        return super().plan_batch(rows, context)


def test_the_policy_is_told_the_batch_a_cycle_runs_at_and_the_waiting_requests():
    traces, cost = random_traces(7), batched_cost()
    policy = Recording()
    served = replay_load(traces, cost, policy, poisson(50.0, 2.0, np.arange(traces.n_prompts), seed=1), 4, 20)
    sizes, waiting = (np.array(x) for x in zip(*policy.seen))
    assert len(policy.seen) == served.cycles and set(sizes) <= {1, 2, 4} and 4 in set(sizes)
    assert waiting.max() > 0 and waiting[-1] == 0  # a queue builds up, and drains


def test_poisson_and_bursty_streams_arrive_at_their_rates():
    prompts = np.arange(5)
    steady = poisson(4.0, 2000, prompts, seed=0)
    assert len(steady.arrival) == pytest.approx(8000, rel=0.03)
    assert np.all(np.diff(steady.arrival) >= 0) and set(steady.prompt) == set(prompts)
    burst = bursty(8.0, on_s=10, off_s=30, duration_s=4000, prompts=prompts, seed=0)
    assert len(burst.arrival) == pytest.approx(8.0 * 4000 / 4, rel=0.05)  # on a quarter of the time
    assert np.all(burst.arrival % 40 <= 10)  # nothing arrives in an off-period
    assert not np.array_equal(poisson(4.0, 50, prompts, seed=1).arrival, poisson(4.0, 50, prompts, seed=2).arrival)


def test_a_stream_file_is_read_in_arrival_order_and_cut_to_the_recorded_continuation(tmp_path):
    traces, cost = random_traces(8), cost_model()
    ids = list(traces.meta.prompt_ids)
    lines = ["arrival_s,prompt_id,output_tokens", f"2.5,{ids[1]},3", f"0.5,{ids[0]},1000"]
    (tmp_path / "s.csv").write_text("\n".join(lines))
    records = [{"arrival_s": 2.5, "prompt_id": ids[1], "output_tokens": 3},
               {"arrival_s": 0.5, "prompt_id": ids[0], "output_tokens": 1000}]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for name in ("s.csv", "s.jsonl"):
        stream = read_stream(tmp_path / name, ids)
        assert stream.arrival.tolist() == [0.5, 2.5] and stream.prompt.tolist() == [0, 1]
        served = replay_load(traces, cost, None, stream, 1)
        assert served.tokens.tolist() == [int(np.diff(traces.prompt_offsets)[0]) + 1, 3]


@pytest.mark.parametrize("text,error", [
    ("arrival_s,prompt_id\n0.5,a", "request 1: missing field 'output_tokens'"),
    ("arrival_s,prompt_id,output_tokens\n0.5,zz,4", "prompt_id 'zz' is not among the traces' prompts"),
    ("arrival_s,prompt_id,output_tokens\nsoon,a,4", "arrival_s must be seconds"),
    ("arrival_s,prompt_id,output_tokens\n", "the request stream is empty"),
])
def test_a_bad_stream_file_is_refused_in_one_line(tmp_path, text, error):
    (tmp_path / "s.csv").write_text(text)
    with pytest.raises(SimspecError, match=error) as caught:
        read_stream(tmp_path / "s.csv", list("abcdefg"))
    assert "\n" not in str(caught.value)


def test_a_bad_rate_or_maximum_batch_is_refused_in_one_line():
    traces = random_traces(9)
    with pytest.raises(SimspecError, match="--rate must be a positive number"):
        poisson(0, 10, np.arange(3))
    with pytest.raises(SimspecError, match="no curves at batch size 8"):
        replay_load(traces, batched_cost(), None, Stream(np.zeros(2), np.arange(2)), 8)


@pytest.mark.e2e
def test_the_load_verb_serves_each_rate_with_every_method(tmp_path):
    """The verb as a user runs it (its bad input: tests/test_bad_input.py's load rows), with a
    surface of two tree sizes and its folder: load.json (what --json printed) and the figure."""
    from helpers import cli, last_json, simspec

    from simspec.sim.evaluate import decision_charges, split_traces
    from simspec.sim.profile import load_profile

    args = ["load", "--profile", "calibration/cpu-demo-batch", "--max-batch", "4", "--duration", "120", "--baselines",
            "static:4,8", "--max-new-tokens", "32", "--rates", "0.02,3", "--surface", "4,8", "--out", tmp_path / "l"]
    result = simspec(*args, "--json")
    assert result.returncode == 0, result.stderr
    s = last_json(result)
    assert s["written"] == [str(tmp_path / "l" / "load.json"), str(tmp_path / "l" / "load.png")]
    assert json.loads((tmp_path / "l" / "load.json").read_text()) == {k: v for k, v in s.items() if k != "written"}
    assert (tmp_path / "l" / "load.png").stat().st_size > 10_000
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "l").stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's private 0700
    # the surface replays the tree it names, a row per rate and size
    assert [(row["stream"]["rate"], row["size"]) for row in s["surface"]] == [(0.02, 4), (0.02, 8), (3.0, 4), (3.0, 8)]
    profile = load_profile("calibration/cpu-demo-batch")
    row, heldout = s["surface"][3], split_traces(profile.traces(), "heldout")
    again = replay_load(heldout, profile.cost, StaticPolicy(row["depth"], 10, 8),
                        poisson(3.0, 120, np.arange(heldout.n_prompts), 0), 4, 32,
                        decision_charges(profile.meta)["grid"])
    assert again.throughput == pytest.approx(row["throughput_tokens_per_s"], rel=1e-12)
    again_out = cli(*args)
    assert again_out.returncode == 2 and "exists" in again_out.stderr  # refused before any work
    assert [r["method"] for r in s["rows"]] == ["plain", "static(D=4,W=10,V=8)"] * 2
    assert [v["stream"]["rate"] for v in s["verdicts"]] == [0.02, 3.0]
    light, heavy = (s["rows"][i]["requests"] for i in (0, 2))
    assert light < heavy and s["rows"][2]["ttft_p50_s"] > s["rows"][0]["ttft_p50_s"]  # a queue at 3/s


def test_speculation_pays_by_goodput_then_throughput_then_latency_past_a_tie():
    """Within 1 % a metric ties and the next decides: at light load, where throughput is the
    arrivals', a tree that halves the time per token pays; a 2 % throughput loss outweighs it."""
    from simspec.measure.load import _best_speculative

    def row(goodput, throughput, tpot):
        return {"goodput_requests_per_s": goodput, "throughput_tokens_per_s": throughput, "tpot_p50_s": tpot}

    plain = row(1.0, 100.0, 0.05)
    assert _best_speculative([plain, row(1.0, 100.4, 0.10), row(1.004, 99.8, 0.025)]) == (row(1.004, 99.8, 0.025),
                                                                                          True)
    assert not _best_speculative([plain, row(1.0, 98.0, 0.025)])[1]  # throughput decides past 1 %
    assert not _best_speculative([plain, row(0.9, 150.0, 0.01)])[1]  # goodput first
    assert not _best_speculative([plain, row(1.0, 100.0, 0.0502)])[1]  # a tie all through: it does not pay


def test_a_sweep_serves_each_profile_as_load_alone_does():
    """``load --sweep`` in this process: every (profile, rate) a load run of its own, merged per
    profile into what one ``simspec load`` of that profile gives (its Ray twin: tests/test_ray.py)."""
    import contextlib

    from simspec.measure.load import LoadRequest, run
    from simspec.measure.load_sweep import parts, sweep

    common = {"max_batch": 1, "rates": (0.05, 0.5), "duration": 60.0, "baselines": ("static:4,8",),
              "max_new_tokens": 32}
    request = LoadRequest(profile="calibration/cpu-demo-batch", sweep=("calibration/h100-demo-analytic",), **common)
    assert [(p.profile, p.rates, p.sweep) for p in parts(request)] == [
        ("calibration/cpu-demo-batch", (0.05,), ()), ("calibration/cpu-demo-batch", (0.5,), ()),
        ("calibration/h100-demo-analytic", (0.05,), ()), ("calibration/h100-demo-analytic", (0.5,), ())]
    quiet = lambda text: contextlib.nullcontext()  # noqa: E731
    s = sweep(request, quiet)
    assert s["runs"] == 4 and s["ray"] is None
    for merged, profile in zip(s["profiles"], (request.profile, *request.sweep)):
        alone = run(LoadRequest(profile=profile, **common), lambda *a, **k: lambda *a, **k: None, quiet)
        assert merged == alone
    cpu, h100 = s["profiles"]
    assert h100["rows"][0]["throughput_tokens_per_s"] != cpu["rows"][0]["throughput_tokens_per_s"]
