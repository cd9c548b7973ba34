"""Benchmark tools, one module each: run_benchmark.py and compare_benchmarks.py. Beside
them: models.py (records and report), metrics.py (the figures, computed from the records),
compare.py (the A/B statistics), port_forward.py (where="local"), render.py (text),
report.py (HTML), result_files.py and plot.py (the files `sleuth bench` writes)."""
