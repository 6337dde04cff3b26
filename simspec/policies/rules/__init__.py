"""The built-in rule baselines, registered in the order ``--baselines`` lists them: static
trees (EAGLE-3's default, the grid best), the depth rules, the classifier stopping rules. A new
built-in is a module here that calls ``register_baseline``, imported below; a baseline outside
the package is any module that calls it (docs/extending.md)."""

from simspec.policies.rules import static, depth, stopping  # noqa: F401  (order: the listing's)
