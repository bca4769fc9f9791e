"""Serving benchmarks: workloads, a streaming client, vLLM-defined metrics, the server's /metrics view, sweeps."""
