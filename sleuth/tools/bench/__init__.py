"""Benchmark tools, one module each: run_benchmark.py (one load, a sweep, or a trace replay;
its input in bench_input.py), compare_benchmarks.py, ab_run.py (ab_benchmark: two
configurations in ABBA turns) and slo_search.py (goodput_search: the highest rate that meets
latency SLOs). Beside them: models.py (records and report), metrics.py (the figures,
computed from the records), stats.py (Student's t, paired intervals, Holm), ab.py (the
verdicts over repeats), compare.py (verdicts on stored runs), goodput.py (SLOs and the rate
search), traces.py (trace formats, retiming, the shared-prefix generator), export.py
(aiperf and inference-perf layouts), port_forward.py (where="local"), render.py (text),
report.py (HTML), result_files.py and plot.py (the files `sleuth bench` writes)."""
