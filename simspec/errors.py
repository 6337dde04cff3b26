"""User-facing errors."""


class SimspecError(Exception):
    """An error caused by the user's input; the CLI prints it as one line and exits non-zero."""
