"""Benchmark scripts (speed and memory; run from the repo root as ``python -m benchmarks.<name>``)."""
