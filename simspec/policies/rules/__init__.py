"""The built-in rule baselines, one registering module each or a few grouped: every module in
this package is imported when the registry first loads, the three below first and in this order
(the order ``--baselines`` lists them), any other after them by name. A new built-in is a new
module here; a baseline outside the package is any module that calls ``register_baseline``
(docs/extending.md)."""

import importlib
import pkgutil

_FIRST = ("static", "depth", "stopping")  # static trees, the depth rules, the classifier stops

for _name in (*_FIRST, *sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _FIRST)):
    importlib.import_module(f"{__name__}.{_name}")
