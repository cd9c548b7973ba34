"""The A/B statistics on their own: Student's t against its tables, the paired interval's
coverage and false-positive rate by simulation, Holm, run pairing, and the verdict words."""

from __future__ import annotations

import math
import random

import pytest

from sleuth.tools.bench.ab import abba, analyse, pairing
from sleuth.tools.bench.models import ClientHealth, Dist, PhaseMetrics
from sleuth.tools.bench.stats import holm, paired_log_ratio, t_quantile, t_two_sided_p


@pytest.mark.parametrize(
    ("q", "df", "table"),
    [
        (0.975, 1, 12.7062),
        (0.975, 4, 2.7764),
        (0.995, 4, 4.6041),
        (0.95, 9, 1.8331),
        (0.975, 30, 2.0423),
        (0.975, 10**6, 1.9600),
    ],
)
def test_t_quantiles_match_the_printed_tables(q: float, df: int, table: float) -> None:
    assert t_quantile(q, df) == pytest.approx(table, abs=1e-4)
    assert t_two_sided_p(t_quantile(q, df), df) == pytest.approx(2 * (1 - q), rel=1e-6)


def test_paired_interval_covers_the_truth_and_calls_noise_a_change_five_percent_of_the_time() -> (
    None
):
    rng = random.Random(7)
    trials, covered, false_positive = 3000, 0, 0
    for _ in range(trials):
        a = [100 * math.exp(rng.gauss(0, 0.01)) for _ in range(5)]
        b = [x * 1.02 * math.exp(rng.gauss(0, 0.01)) for x in a]
        est = paired_log_ratio(a, b, 0.95)
        assert est is not None
        covered += est.ci_low <= 0.02 <= est.ci_high
        same = paired_log_ratio(a, [x * math.exp(rng.gauss(0, 0.01)) for x in a], 0.95)
        assert same is not None
        false_positive += same.p_value < 0.05
    assert 0.93 < covered / trials < 0.97
    assert 0.03 < false_positive / trials < 0.07


def test_paired_interval_needs_two_pairs_and_reports_exact_ratios() -> None:
    assert paired_log_ratio([10.0], [11.0], 0.95) is None
    est = paired_log_ratio([10.0, 20.0], [11.0, 22.0], 0.95)
    assert est is not None
    assert est.change == pytest.approx(0.1) and est.ci_low == pytest.approx(0.1)
    assert est.p_value == 0.0
    same = paired_log_ratio([10.0, 20.0], [10.0, 20.0], 0.95)
    assert same is not None and same.p_value == 1.0


def test_holm_adjusts_step_down_and_keeps_order() -> None:
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == []


def test_abba_order_and_pairing_see_interleaving_and_its_absence() -> None:
    order = abba(5)
    assert "".join(order) == "ABBAABBAAB"
    starts = [(side, float(t)) for t, side in enumerate(order)]
    seen, interleaved, pairs = pairing(starts)
    assert seen == "ABBAABBAAB" and interleaved and len(pairs) == 5
    blocked = [("A", 0.0), ("A", 1.0), ("B", 2.0), ("B", 3.0)]
    seen, interleaved, pairs = pairing(blocked)
    assert seen == "AABB" and not interleaved and pairs == [(0, 2), (1, 3)]


def phase(tpot_ms: float, ttft_ms: float, throughput: float) -> PhaseMetrics:
    def d(v: float) -> Dist:
        return Dist(n=10, mean=v, p50=v, p90=v * 1.1, p99=v * 1.2)

    return PhaseMetrics.model_construct(
        ttft=d(ttft_ms),
        tpot=d(tpot_ms),
        itl_token=d(tpot_ms),
        e2e=d(ttft_ms + 20 * tpot_ms),
        output_throughput=throughput,
        request_throughput=throughput / 20,
        goodput=None,
        client=ClientHealth(cpu_share=0.1, loop_lag=Dist(), client_limited=False),
    )


def test_verdicts_say_slower_faster_or_no_difference_with_the_right_direction() -> None:
    rng = random.Random(3)
    noise = [math.exp(rng.gauss(0, 0.002)) for _ in range(20)]
    a = [phase(20 * noise[i], 200 * noise[i + 5], 1000 * noise[i + 10]) for i in range(5)]
    b = [phase(20.6 * noise[i + 1], 200 * noise[i + 6], 1030 * noise[i + 11]) for i in range(5)]
    analysis = analyse(a, b, order="ABBAABBAAB", interleaved=True)
    verdicts = {f"{m.metric} {m.stat}".strip(): m for m in analysis.metrics}
    assert verdicts["tpot p50"].verdict == "slower"
    assert verdicts["tpot p50"].change == pytest.approx(0.03, abs=0.005)
    assert verdicts["output throughput"].verdict == "faster"  # higher throughput is better
    assert verdicts["ttft p50"].verdict == "no detectable difference"
    assert "B is slower in TPOT p50" in analysis.summary
    assert "goodput" not in verdicts  # no SLO, no goodput figure
    assert not analysis.warnings


def test_runs_that_did_not_take_turns_are_flagged_as_drift_confounded() -> None:
    a = [phase(20, 200, 1000) for _ in range(3)]
    analysis = analyse(a, a, order="AAABBB", interleaved=False)
    assert analysis.summary.startswith("NOT INTERLEAVED, drift confounded")
    assert any("not interleaved" in w for w in analysis.warnings)
    one = analyse(a[:1], a[:1], order="AB", interleaved=True)
    assert all(m.verdict == "not comparable" for m in one.metrics)
