"""The training curve of a policy: per logged point, the phase, the environment steps so far,
the mean reward per step of the latest rollout and (where checked) the validation speedup."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

COLUMNS = ("phase", "env_steps", "reward", "validation_speedup")


@dataclass
class TrainingLog:
    rows: list[dict] = field(default_factory=list)

    def add(self, phase: str, env_steps: int, reward: float | None, validation: float | None) -> None:
        self.rows.append({"phase": phase, "env_steps": int(env_steps), "reward": reward,
                          "validation_speedup": validation})

    def validation_curve(self) -> list[list]:
        return [[r["phase"], r["env_steps"], r["validation_speedup"]] for r in self.rows
                if r["validation_speedup"] is not None]

    def write_csv(self, path: Path) -> None:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            for row in self.rows:
                writer.writerow({k: "" if row[k] is None else row[k] for k in COLUMNS})


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{"phase": r["phase"], "env_steps": int(r["env_steps"]),
                 "reward": float(r["reward"]) if r["reward"] else None,
                 "validation_speedup": float(r["validation_speedup"]) if r["validation_speedup"] else None}
                for r in csv.DictReader(f)]
