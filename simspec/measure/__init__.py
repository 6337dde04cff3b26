"""Measurement on real models: latency curves, traces, in-situ refits, real runs against plain decoding."""
