"""How long a sequence the engine serves a target exactly: its position limit, or its sliding
attention window (the tree masks attend every cached token: past the window, refused)."""

from __future__ import annotations


def attention_window(config) -> int | None:
    """The sliding window of ``config``'s attention where one is in use; None: full attention."""
    window = getattr(config, "sliding_window", None)
    if not window or not getattr(config, "use_sliding_window", True):
        return None
    return int(window)


def served_context(config) -> tuple[int, str]:
    """The longest sequence (prompt + new tokens) served exactly, and the phrase naming what
    limits it."""
    positions = int(getattr(config, "max_position_embeddings", None) or 1 << 30)
    window = attention_window(config)
    if window is not None and window < positions:
        return window, (f"sliding attention window of {window} tokens (the engine's tree attention sees the "
                        "whole context, so it decodes such a target exactly only within its window)")
    return positions, f"context of {positions}"
