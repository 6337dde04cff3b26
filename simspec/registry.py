"""One registry type for simspec's extension points (rule baselines, learned algorithms, drafter
formats): a name maps to a frozen spec, in the order registered, so the CLI's choices, help and
defaults follow from what is registered. Plugins (``simspec.plugins`` entry points, modules named in
``$SIMSPEC_PLUGINS``) are imported right after the built-ins, before the first lookup."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from simspec.errors import SimspecError

Spec = TypeVar("Spec")


class Registry(Generic[Spec]):
    """Name -> spec; ``builtins``: modules imported (once, in order) before the first lookup or registration."""

    def __init__(self, kind: str, builtins: tuple[str, ...]) -> None:
        self.kind, self._builtins = kind, builtins
        self._specs: dict[str, Spec] = {}
        self._loaded = False

    def _load_builtins(self) -> None:
        if not self._loaded:
            self._loaded = True  # first: the built-in modules register through this same registry
            for module in self._builtins:
                importlib.import_module(module)

    def _load(self) -> None:
        self._load_builtins()
        load_plugins()

    def add(self, name: str, spec: Spec) -> Spec:
        self._load_builtins()  # built-ins first, whoever registers first
        if name in self._specs:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._specs[name] = spec
        return spec

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests that register one of their own clean up with it)."""
        self._specs.pop(name, None)

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(self._specs)

    def specs(self) -> Iterator[Spec]:
        self._load()
        return iter(tuple(self._specs.values()))

    def __iter__(self) -> Iterator[str]:
        """The names, in the order registered."""
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        self._load()
        return isinstance(name, str) and name in self._specs

    def get(self, name: str, unknown: Callable[[str], str] | None = None) -> Spec:
        """The spec of ``name``; an unknown name is a one-line error (``unknown(name)`` words it)."""
        self._load()
        if name not in self._specs:
            raise SimspecError(unknown(name) if unknown else
                               f"unknown {self.kind} {name!r}: choose from {', '.join(self._specs)}")
        return self._specs[name]


_plugins_loaded = False


def load_plugins() -> None:
    """Imports the ``simspec.plugins`` entry points, then the modules ``$SIMSPEC_PLUGINS`` names
    (comma-separated); once. The CLI calls it before it parses, so a plugin may add a verb."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    import os
    from importlib.metadata import entry_points

    for point in entry_points(group="simspec.plugins"):
        point.load()
    for module in filter(None, (m.strip() for m in os.environ.get("SIMSPEC_PLUGINS", "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:  # a warning, not an error: the CLI builds its help from here, at import
            import warnings

            warnings.warn(f"$SIMSPEC_PLUGINS names {module!r}, which does not import ({exc}): put its folder on "
                          "PYTHONPATH, or fix the name; going on without it", PluginWarning, stacklevel=2)


class PluginWarning(UserWarning):
    """A module named in ``$SIMSPEC_PLUGINS`` could not be imported."""
