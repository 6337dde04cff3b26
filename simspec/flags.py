"""Each flag declared once: a request field's default, help and bounds, read by the CLI.

A request (a frozen, keyword-only dataclass owned by the module that does the work) declares every
field with ``opt``; ``command`` turns the fields into the verb's options and builds the request by
keyword. A list flag (``--depths 1,3,5``) names a ``parse``: the request holds the tuple, and the
flag's text default is the tuple joined with commas. Typer only: no torch, no numpy."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from functools import partial
from typing import Annotated, Any

from simspec.errors import SimspecError

Parse = Callable[[str, str], tuple]  # (the flag's text, the flag's name) -> the field's value


def opt(default: Any = dataclasses.MISSING, help: str | Callable[[], str] = "", *, flag: str | None = None,
        min: float | None = None, max: float | None = None, parse: Parse | None = None,
        factory: Callable[[], Any] | None = None, cli: bool = True) -> Any:
    """A request field that is also a flag: its default (none: required), ``--help`` text, name when not
    the field's (``--cut-at-eos/--no-cut-at-eos``), bounds and list ``parse``. A default or help a
    registry makes is a ``factory`` / a callable, read after every plugin has registered.
    ``cli=False``: a field the verb fills itself, not a flag."""
    metadata = {"help": help, "flag": flag, "min": min, "max": max, "parse": parse, "cli": cli}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# --- flags several verbs share: each declared here, once, with one help text ------------------
# A verb's own facts about a shared flag (its --out's default, what its --seed draws) go in the
# verb's docstring, its help; a flag that means something else in a verb takes another name.
# tests/test_cli.py fails on a flag name declared with a second help text.
THREADS = ("torch CPU threads (default: the profile's where the verb reads one, else $OMP_NUM_THREADS if set, else "
           "all cores).")
JSON = "End stdout with one JSON line of the results."
SIMULATED = "Replay the profile's traces in the simulator (fast, no models)."


# A flag whose default each verb sets takes it as the first argument (``flags.n_prompts(8)``), a list
# flag its ``parse=``; the rest are called bare (``flags.profile()``).
profile = partial(opt, help="A profile folder (calibration/NAME): its latency curves and the draft trees recorded "
                  "with them.")
target = partial(opt, "smollm2-135m-instruct", "Target: a built-in name (smollm2-135m-instruct), a Hugging Face "
                 "model directory, a .gguf file, or for an analytic profile an architecture (arch:llama-3.1-8b).")
draft = partial(opt, "eagle")  # its help passed in: this module imports none of simspec's packages (no cycle)
prompts = partial(opt, "humaneval", "Prompt set: humaneval, sharegpt (first turns), sharegpt-later (second turns), "
                  "the 1-2 k token humaneval-long (modules) and sharegpt-long (histories), a JSONL file with a "
                  "'prompt' string or 'turns' list per line, or a mix taken in turn, e.g. humaneval+sharegpt.")
n_prompts = partial(opt, help="How many prompts: the first N of the set (of its split, where the verb takes one).",
                    min=1)
split = partial(opt, "heldout", "Prompts: heldout, train or all.")
REAL_TOKENS = 48  # the real engine's new tokens per prompt where --max-new-tokens is unset
max_new_tokens = partial(opt, help="New tokens per prompt (unset: a replay runs every token its traces recorded, the "
                         f"real engine {REAL_TOKENS}).", min=1)
repeats = partial(opt, help="Times each measurement is repeated, interleaved with the others (a pass over the "
                  "prompts, a timed replay); the median is reported.", min=1)
temperature = partial(opt, help="Sampling temperature: 0 decodes greedily (outputs checked token for token), above 0 "
                      "samples from softmax(logits / T) (outputs checked in distribution). A profile's traces fix it: "
                      "unset, theirs; another is refused.", min=0.0)
device = partial(opt, "auto", "auto, cpu or cuda.")
dtype = partial(opt, "fp32", "fp32, bf16 or fp16: target and drafter weights and activations (lossless means equal "
                "to plain decoding in the same dtype; bf16 is native on CPUs with AVX512-BF16 or AMX, emulated and "
                "slower than fp32 elsewhere, which a warning says).")
batch_size = partial(opt, 1, "Sequences decoded together: B rows, each with its own tree (and at T > 0 its own seed), "
                     "share every draft and verify forward; a finished row takes the next prompt (continuous "
                     "batching). Speedups compare with plain decoding at the same batch size; the profile needs curves "
                     "at B (calibrate --batch-sizes).", min=1)
batch_sizes = partial(opt, help="Batch sizes to cover besides 1, e.g. 1,2,4,8: calibrate measures (or models) the "
                      "verify, draft and plain-step curves at each; tune and headroom answer for each.")
recalibrate = partial(opt, False, "With the live engine (validate --real, load --live): first refit the profile in "
                      "situ (as `simspec recalibrate` does) on train-split prompts, right before the scored runs and "
                      "through the same rows (at --batch-size or --max-batch B, the curves at B), and predict with "
                      "that refit (validate saves it in RUN/profile/). Adds minutes.", flag="--recalibrate")
recalibrate_prompts = partial(opt, 8, "--recalibrate: train-split prompts to refit on.", min=1)
refit_ladder = partial(opt, "full", "The refits' static trees (validate's co-timed refit rotates through them too): "
                       "full (17, V 2-128) or quick (12, V 2-64, as calibrate --quick's engine fit: about a third "
                       "faster, for short runs that verify no larger tree), or trees of your own as depth:size pairs "
                       "(3:4,4:8: the sizes you will run; sizes between them take an interpolated scale, sizes beyond "
                       "them the nearest one's).")
tpot_target = partial(opt, 0.1, "Goodput's latency target: seconds per output token a request must not exceed.",
                      min=0.0)
duration = partial(opt, 600.0, "Seconds of arrivals in a request stream.", min=1.0)
runtime = partial(opt, "eager", "eager: the Hugging Face forwards as they are. compiled: the target's forwards under "
                  "torch.compile over a static cache, in shape buckets (tokens padded to a power of two); each bucket "
                  "compiles on first use (tens of seconds per bucket on a CPU, shown and reported), then runs "
                  "faster. calibrate and validate --real time it at batch size 1; bench-engine at any.")
tree_widths = partial(opt, help="Tree widths W: the nodes a draft step expands, top-k children each.")
tree_sizes = partial(opt, help="Verified nodes V (root included): the target's tokens per forward; a tree's capped at "
                     "its node count.")
preset = partial(opt, help="Training schedule: paper (the seed's networks, hyper-parameters and step counts), fast "
                 "(the same networks, about a tenth of the steps: minutes) or smoke (seconds: checks the wiring, "
                 "learns little).")
ray = partial(opt, None, "Run the work as Ray tasks: 'local' (a Ray instance on this machine) or a cluster's ADDRESS "
              "(host:port); without it, one task after another in this process. Needs pip install "
              "\"simspec[ray]\".")
workers = partial(opt, help="With --ray: tasks at once (calibrate: the prompt shards, each of --threads threads).",
                  min=1)
top_p = partial(opt, 1.0, "Nucleus sampling: keep the likeliest tokens up to this mass (T > 0 only).")
seed = partial(opt, 0, "Seeds everything the verb draws at random (sampling at T > 0, initialisation, data order): "
               "same seed, same result.")
force = partial(opt, False, "Replace what --out holds (a plot: its figure of the same name).")
allow_other_device = partial(opt, False, "Use a profile measured on another device model (CPU or GPU) than this one, "
                             "with a warning, instead of refusing it.")


def policies() -> Any:
    return opt((), "Comma-separated learned policy folders (policies/NAME), scored beside the baselines; each is "
               "charged its measured decision time.", parse=names)


def algos(default: Any, registered: Callable[[], tuple[str, ...]]) -> Any:
    """``--algos``: learned algorithms, comma-separated; ``registered`` names them (after plugins)."""
    return opt(default, lambda: f"Comma-separated learned algorithms: {', '.join(registered())}.", parse=names)


def out(default: Any = None) -> Any:
    """``--out``; ``dataclasses.MISSING``: a required one."""
    return opt(default, "The folder to write (its default: the verb's help); refused if it exists, unless --force.")


# --- list flags --------------------------------------------------------------------------------
def names(text: str, flag: str = "") -> tuple[str, ...]:
    """``a, b,,c`` -> ("a", "b", "c")."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def ints(text: str, flag: str) -> tuple[int, ...]:
    """Comma-separated integers, any sign (an empty text: none)."""
    try:
        return tuple(int(v) for v in names(text))
    except ValueError:
        raise SimspecError(f"{flag} takes comma-separated integers, got {text!r}") from None


def sizes(text: str, flag: str) -> tuple[int, ...]:
    """Comma-separated integers >= 1, at least one (a grid's depths, widths, sizes)."""
    values = ints(text, flag)
    if not values:
        raise SimspecError(f"{flag} is empty")
    bad = [v for v in values if v < 1]
    if bad:
        what = {"--depths": "D", "--widths": "W", "--sizes": "V"}.get(flag, "each value")
        raise SimspecError(f"{flag}: {what} must be >= 1, got {bad[0]}")
    return values


def optional_sizes(text: str, flag: str) -> tuple[int, ...]:
    """``sizes``, or none at all (a flag whose absence means "not asked")."""
    return sizes(text, flag) if text.strip() else ()


# --- the command a request makes ---------------------------------------------------------------
def _flag_name(f: dataclasses.Field) -> str:
    return (f.metadata.get("flag") or "--" + f.name.replace("_", "-")).split("/")[0]


def given(request: Any, among: Iterable[str]) -> list[str]:
    """The flags of ``request``'s fields ``among`` that hold another value than their default: what a mode
    that reads none of them would ignore without a word."""
    named = []
    for f in dataclasses.fields(request):
        if f.name in among:
            default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            if getattr(request, f.name) != default:
                named.append(_flag_name(f))
    return named


def _cli_type(hint: Any) -> Any:
    """``X | None`` (or ``Optional[X]``) as typer reads it: one type or None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] | None if len(args) == 1 else hint
    return hint


def parameters(request: type) -> list[inspect.Parameter]:
    """The request's fields as typer options, in declaration order."""
    import typer

    hints = typing.get_type_hints(request)
    params = []
    for f in dataclasses.fields(request):
        m = f.metadata
        if not m.get("cli", True):
            continue
        kind, help = _cli_type(hints[f.name]), m.get("help", "")
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if m.get("parse"):  # the flag takes text; its default is the field's, written out
            kind = str | None if default is None else str
            default = default if default in (None, dataclasses.MISSING) else ",".join(map(str, default))
        option = typer.Option(*([m["flag"]] if m.get("flag") else []), help=help() if callable(help) else help,
                              min=m.get("min"), max=m.get("max"))
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, option],
                                        default=inspect.Parameter.empty if default is dataclasses.MISSING else default))
    return params


def build(request: type, values: dict[str, Any]) -> Any:
    """The request from parsed flag values, by keyword (list flags through their ``parse``)."""
    kwargs = {}
    for f in dataclasses.fields(request):
        if f.name not in values and not f.metadata.get("cli", True):
            continue  # the verb did not fill it: its default
        value, parse = values[f.name], f.metadata.get("parse")
        kwargs[f.name] = parse(value, _flag_name(f)) if parse and isinstance(value, str) else value
    return request(**kwargs)


_named: tuple[str, ...] | None = None  # the verb path being parsed; None: every verb reads its request


@contextlib.contextmanager
def naming(args: list[str]):
    """While typer parses ``args``, only the verb they name reads its request: every start builds every
    verb, and importing each request's module (numpy, gymnasium) would slow every command down."""
    global _named
    words: list[str] = []  # the verb's path (``plot surface``): the words before its first option
    for arg in args:
        if arg.startswith("-") and words:
            break
        words += [] if arg.startswith("-") else [arg]
    before, _named = _named, tuple(words)
    try:
        yield
    finally:
        _named = before


class Verb:
    """A verb typer builds from ``__signature__``: the request's fields, then the body's own keyword
    parameters (``--json``; those in ``lead``, a mode, right after the first field). The body gets the
    request built by keyword; its docstring is the help. With ``options`` (one options class per
    ``--algo``), every class's fields are flags too, the chosen one's the request's ``options``."""

    def __init__(self, name: str, request: str, body: Callable, lead: tuple[str, ...],
                 options: tuple[str, str] | None = None) -> None:
        self.name, self._request, self._body, self._lead, self._options = name, request, body, lead, options
        self.__name__, self.__qualname__, self.__doc__ = body.__name__, body.__qualname__, body.__doc__
        self.__module__, self.__annotations__ = body.__module__, {}

    def request(self) -> type:
        """The request class (``module:Class``), imported now."""
        return _imported(self._request)

    def option_classes(self) -> dict[str, type]:
        """Choice -> its own options class (from ``options``' ``module:function``); none without."""
        return _imported(self._options[0])() if self._options else {}

    @property
    def __signature__(self) -> inspect.Signature:
        if _named is not None and self.name not in _named:
            return inspect.Signature([])  # not run: the verb list needs its name and docstring only
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for p in list(inspect.signature(self._body).parameters.values())[1:]]
        try:
            params = parameters(self.request())
            seen = {p.name for p in params}
            for options in self.option_classes().values():  # each choice's own flags, once
                fresh = [p for p in parameters(options) if p.name not in seen]
                seen |= {p.name for p in fresh}
                params += fresh
        except AttributeError as exc:  # inside a property it would read as "no signature": typer takes __call__'s
            raise RuntimeError(f"verb {self.name}: {exc}") from exc
        first = [p for p in own if p.name in self._lead]
        return inspect.Signature([*params[:1], *first, *params[1:], *[p for p in own if p.name not in self._lead]])

    def __call__(self, **values: Any) -> Any:
        request = self.request()
        fields = {f.name for f in dataclasses.fields(request)}
        chosen = self._chosen_options(values)
        extras = {k: values.pop(k) for k in list(values) if k not in fields}
        return self._body(build(request, {**values, **chosen}), **extras)

    def _chosen_options(self, values: dict[str, Any]) -> dict[str, Any]:
        """Pops every choice's flags from ``values``; ``{"options": the chosen one's}``, refusing a flag of
        another choice given a value."""
        classes = self.option_classes()
        if not classes:
            return {}
        selector = self._options[1]
        chosen = values.get(selector)
        mine = {f.name for f in dataclasses.fields(classes[chosen])} if chosen in classes else set()
        own = {}
        for name, options in classes.items():
            defaults = {p.name: p.default for p in parameters(options)}
            for f in dataclasses.fields(options):
                if f.name in mine:
                    own[f.name] = values.get(f.name, defaults[f.name])
                elif f.name in values and values[f.name] != defaults[f.name]:
                    raise SimspecError(f"{_flag_name(f)} applies to --{selector} {name} only")
        for options in classes.values():
            for f in dataclasses.fields(options):
                values.pop(f.name, None)
        return {"options": build(classes[chosen], own)} if chosen in classes else {}


def _imported(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def command(app: Any, name: str, request: str, lead: tuple[str, ...] = (), options: tuple[str, str] | None = None
            ) -> Callable[[Callable], Callable]:
    """Registers ``body(request, **extras)`` as verb ``name`` of ``app`` (see ``Verb``)."""

    def register(body: Callable) -> Callable:
        app.command(name)(Verb(name, request, body, lead, options))
        return body

    return register
