"""Measurement on real models: latency curves (calibrate), trace recording, in-situ refits
(recalibrate), interleaved runs against greedy decoding (bench-engine, validate --real)."""
