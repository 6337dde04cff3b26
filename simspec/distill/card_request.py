"""What ``simspec drafter-card`` is asked for, apart from ``simspec.distill.card`` (which loads
torch): the CLI reads the request's flags on every start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simspec import flags
from simspec.engine.formats import draft_help
from simspec.errors import SimspecError


@dataclass(frozen=True, kw_only=True)
class CardRequest:
    draft: str = flags.draft(draft_help)
    target: str = flags.target()
    n_prompts: int = flags.n_prompts(8)
    max_new_tokens: int = flags.max_new_tokens(64)
    dtype: str = flags.dtype()
    out: str | None = flags.out()

    def check(self) -> None:
        from simspec.engine.models import resolve_dtype

        resolve_dtype(self.dtype)
        if self.out is not None and Path(self.out).exists() and not Path(self.out).is_dir():
            raise SimspecError(f"--out {self.out} is a file: name a folder for the card (README.md + measured.json)")
