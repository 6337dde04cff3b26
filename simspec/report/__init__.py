"""Tables, statistics and figures (matplotlib, headless)."""
