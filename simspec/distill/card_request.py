"""What ``simspec drafter-card`` is asked for, apart from ``simspec.distill.card`` (which loads
torch): the CLI reads the request's flags on every start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt


@dataclass(frozen=True, kw_only=True)
class CardRequest:
    draft: str = opt("eagle", "A shipped drafter name or a drafter directory (simspec or EAGLE).")
    target: str = flags.target()
    n_prompts: int = opt(8, "Held-out prompts per source for agreement and acceptance.", min=1)
    max_new_tokens: int = opt(64, "New tokens per prompt.", min=1)
    dtype: str = flags.dtype()
    out: str | None = opt(None, "Folder for the card (README.md + measured.json); default: the drafter's own folder. "
                          "Use it for a second card (another dtype or machine) that must not replace the drafter's.")

    def check(self) -> None:
        from simspec.engine.models import resolve_dtype

        resolve_dtype(self.dtype)
        if self.out is not None and Path(self.out).exists() and not Path(self.out).is_dir():
            raise SimspecError(f"--out {self.out} is a file: name a folder for the card (README.md + measured.json)")
