"""The simulator side: traces, cost models, profiles, replay (numpy only: no torch here)."""
