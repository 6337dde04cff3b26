"""``simspec sweep``: many trainings on one profile (algorithms x rewards x seeds), one after
another or as Ray tasks, and a table of held-out speedups over seeds per configuration.

A trial is ``simspec train --simulated`` writing its policy folder inside the sweep's, at
``threads`` torch threads here or in a Ray worker alike (a policy depends on the thread count).
Under Ray each trial is a task returning its folder's files, which the driver writes; a failed
worker's trial is retried. The folder is renamed into place once every trial has finished.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simspec import flags
from simspec.cluster import check_ray
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.policies.algorithms import algo_names

MAX_FAILURES = 2  # retries of a failed Ray task
# The numbers of a trial's ``train`` summary that a Ray task reports back to the driver.
REPORTED = ("train_seconds", "env_steps", "heldout_speedup", "grid_best_speedup", "eagle3_speedup", "oracle_share")


@dataclass(frozen=True)
class Trial:
    algo: str
    reward: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.algo}-{self.reward}-s{self.seed}"


@dataclass(frozen=True, kw_only=True)
class SweepRequest:
    profile: str = flags.profile()
    algos: tuple[str, ...] = flags.algos(dataclasses.MISSING, algo_names)
    seeds: tuple[int, ...] = opt((0,), "Comma-separated seeds, e.g. 1,2,3.", parse=flags.ints)
    rewards: tuple[str, ...] = opt(("throughput",), "Comma-separated rewards: throughput, acceptance, time.",
                                   parse=flags.names)
    preset: str = flags.preset("fast")
    # "local" or a cluster address; None: one trial after another, here
    ray: str | None = flags.ray()
    workers: int = flags.workers(2)
    trial_threads: int = opt(1, "torch threads of every trial, with or without Ray (a seed gives the same policy at "
                             "the same thread count); under Ray, the CPUs a trial asks for.", min=1)
    out: str | None = flags.out()
    force: bool = flags.force()

    def trials(self) -> list[Trial]:
        return [Trial(a, r, s) for a, r, s in itertools.product(self.algos, self.rewards, self.seeds)]

    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("policies") / f"sweep-{Path(self.profile).name}"

    def train_request(self, trial: Trial, folder: Path):
        from simspec.train.run import TrainRequest

        return TrainRequest(profile=self.profile, algo=trial.algo, preset=self.preset, reward=trial.reward,
                            seed=trial.seed, out=str(folder / trial.name), force=True)

    def check(self) -> None:
        """Every flag, each trial's request and the output folder, before any training."""
        from simspec.cache import check_out

        if not self.algos or not self.seeds or not self.rewards:
            raise SimspecError("a sweep needs at least one --algos, one --seeds value and one --rewards")
        for name, values in (("--algos", self.algos), ("--seeds", self.seeds), ("--rewards", self.rewards)):
            if len(set(values)) < len(values):
                raise SimspecError(f"{name} names a value twice: {', '.join(map(str, values))}")
        if self.trial_threads < 1 or self.workers < 1:
            raise SimspecError("--trial-threads and --workers take a number >= 1")
        check_out(self.out_dir(), self.force)
        check_ray(self)
        scratch = Path(tempfile.mkdtemp(prefix=".simspec-sweep-check-"))
        try:
            for trial in self.trials():
                self.train_request(trial, scratch).check()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def run_trial(request: SweepRequest, trial: Trial, folder: Path, advance: Callable[[int], None] = lambda n: None
              ) -> dict:
    """One training, at the sweep's thread count; the ``train`` summary."""
    import torch

    from simspec.train.run import train_policy

    torch.set_num_threads(request.trial_threads)
    return train_policy(request.train_request(trial, folder), advance)


def _ray_trial(request: SweepRequest, trial: Trial) -> tuple[dict, dict[str, bytes]]:
    """A Ray task: one trial in a scratch folder; its numbers and files (path -> bytes), via the object store."""
    work = Path(tempfile.mkdtemp(prefix=".simspec-trial-"))
    try:
        summary = run_trial(request, trial, work)
        files = {str(path.relative_to(work)): path.read_bytes() for path in work.rglob("*") if path.is_file()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {k: summary[k] for k in REPORTED}, files


def _run_on_ray(request: SweepRequest, trials: list[Trial], folder: Path, status) -> list[dict]:
    from simspec.cluster import connect, failed

    ray, _ = connect(request.ray, request.workers, request.trial_threads)
    task = ray.remote(num_cpus=request.trial_threads, max_retries=MAX_FAILURES, retry_exceptions=True)(_ray_trial)
    pending = [task.remote(request, trial) for trial in trials]
    summaries = []
    with status(f"{len(trials)} trials as Ray tasks ({request.ray})"):
        for trial, ref in zip(trials, pending):
            try:
                reported, files = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise failed(ray, exc, pending, f"trial {trial.name}", MAX_FAILURES) from None
            for name, blob in files.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(blob)
            summaries.append({"policy": str(folder / trial.name), "algo": trial.algo, **reported})
    return summaries


def table(rows: list[dict]) -> list[dict]:
    """Per (algorithm, reward): held-out speedup mean and sd over seeds, beside the grid best's."""
    out = []
    for algo, reward in sorted({(r["algo"], r["reward"]) for r in rows}):
        mine = [r for r in rows if (r["algo"], r["reward"]) == (algo, reward)]
        speedups = [r["heldout_speedup"] for r in mine]
        out.append({"algo": algo, "reward": reward, "seeds": [r["seed"] for r in mine],
                    "speedup_mean": statistics.fmean(speedups),
                    "speedup_sd": statistics.stdev(speedups) if len(speedups) > 1 else 0.0,
                    "speedups": speedups, "grid_best_speedup": mine[0]["grid_best_speedup"],
                    "eagle3_speedup": mine[0]["eagle3_speedup"]})
    return out


def run(request: SweepRequest, bar, status) -> dict:
    """Every trial, then the summary (also ``sweep.json`` in the sweep folder); the ``--json`` line."""
    from simspec.cache import atomic_directory
    from simspec.train.run import total_work

    request.check()
    trials = request.trials()
    started = time.perf_counter()
    with atomic_directory(request.out_dir(), replace=request.force) as folder:
        if request.ray is None:
            summaries = [run_trial(request, trial, folder, bar(f"trial {trial.name}",
                                                               total_work(request.train_request(trial, Path(".")))))
                         for trial in trials]
        else:
            summaries = _run_on_ray(request, trials, folder, status)
        rows = [{**s, "policy": str(request.out_dir() / t.name), "reward": t.reward, "seed": t.seed}
                for s, t in zip(summaries, trials)]
        summary = {"sweep": str(request.out_dir()), "profile": request.profile, "preset": request.preset,
                   "ray": request.ray, "threads": request.trial_threads, "trials": rows, "table": table(rows),
                   "seconds": time.perf_counter() - started}
        (folder / "sweep.json").write_text(json.dumps(summary, indent=1))
    return summary
