"""User-facing errors, and the one way simspec reads its JSON artifacts into them."""

from __future__ import annotations

import json
from pathlib import Path


class SimspecError(Exception):
    """An error caused by the user's input; the CLI prints it as one line and exits non-zero."""


def read_json(file: Path, what: str, missing: str, fix: str):
    """The JSON in ``file``. A missing file raises ``missing``; an unreadable one says which
    ``what`` (e.g. "profile ") it was, why it failed, and ``fix``."""
    try:
        return json.loads(Path(file).read_text())
    except FileNotFoundError:
        raise SimspecError(missing) from None
    except (OSError, ValueError) as exc:
        raise SimspecError(f"{what}{file} is unreadable ({exc.__class__.__name__}): {fix}") from None
