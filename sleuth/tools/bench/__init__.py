"""Benchmark tools: run_benchmark and compare_benchmarks, with their metrics and reports."""
