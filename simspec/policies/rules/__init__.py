"""The built-in rule baselines: every module here is imported when the registry first loads, the
three below first (the order ``--baselines`` lists them), any other after them by name."""

import importlib
import pkgutil

_FIRST = ("static", "depth", "stopping")  # static trees, the depth rules, the classifier stops

for _name in (*_FIRST, *sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _FIRST)):
    importlib.import_module(f"{__name__}.{_name}")
