"""`GET /metrics`: the server's Prometheus text (prometheus_client, on a registry of the server's own).

- `gsr_requests_total{route, code}` and `gsr_request_duration_seconds{route}` (a histogram, for
  `histogram_quantile` across servers), and `gsr_request_latency_seconds{route, quantile}`: the 0.5, 0.9 and
  0.99 quantiles of the last 2,048 requests of each route (a summary: the percentiles, read as they are);
- `gsr_rewards_total{status}`: items scored (ok, invalid, failed) and `gsr_unfinished_total` (past a deadline);
- `gsr_batch_items`: items per micro-batch; `gsr_in_flight_items`;
- from the judges: `gsr_judge_calls_total{judge}`, `gsr_judge_http_requests_total`,
  `gsr_judge_cache_hits_total`, `gsr_judge_merged_total` (identical calls merged in flight),
  `gsr_judge_call_failures_total`, `gsr_judge_tokens_total{kind}` (prompt, completion), and
  `gsr_judge_spend_usd_total` where the model judge counts dollars;
- `gsr_program_info{name, hash}` (the served program), `gsr_reloads_total{outcome}` (loaded, refused),
  `gsr_trace_errors_total`.
"""

from __future__ import annotations

import collections
import statistics

__all__ = ["Metrics"]

WINDOW = 2048
QUANTILES = (0.5, 0.9, 0.99)


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile of `xs` (linear interpolation between order statistics, numpy's default)."""
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=1000, method="inclusive")[min(998, max(0, round(q * 1000) - 1))]


class Metrics:
    def __init__(self, engine_state):
        """`engine_state()` -> (the served program's name and hash, items in flight, the judges' usage)."""
        from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

        disable_created_metrics()  # no `_created` series: the counters start with the server

        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("gsr_requests", "HTTP requests by route and status code", ["route", "code"],
                                registry=self.registry)
        self.duration = Histogram("gsr_request_duration_seconds", "request latency", ["route"],
                                  buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
                                  registry=self.registry)
        self.rewards = Counter("gsr_rewards", "items scored, by status", ["status"], registry=self.registry)
        self.unfinished = Counter("gsr_unfinished", "items unfinished at their request's deadline",
                                  registry=self.registry)
        self.batches = Histogram("gsr_batch_items", "items per micro-batch",
                                 buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), registry=self.registry)
        self.reloads = Counter("gsr_reloads", "program reloads, by outcome", ["outcome"], registry=self.registry)
        self.trace_errors = Counter("gsr_trace_errors", "trace records that could not be written",
                                    registry=self.registry)
        self.recent: dict[str, collections.deque] = {}  # route -> the latencies of its last WINDOW requests
        self.state = engine_state
        self.registry.register(_Live(self))

    def request(self, route: str, code: int, seconds: float) -> None:
        self.requests.labels(route, str(code)).inc()
        self.duration.labels(route).observe(seconds)
        self.recent.setdefault(route, collections.deque(maxlen=WINDOW)).append(seconds)

    def item(self, status: str) -> None:
        self.rewards.labels(status).inc()

    def batch(self, n: int) -> None:
        self.batches.observe(n)

    def trace_error(self) -> None:
        self.trace_errors.inc()

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _Live:
    """The figures read when scraped: latency quantiles, the program, items in flight, the judges' counters."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

        m = self.metrics
        summary = Metric("gsr_request_latency_seconds", f"request latency over the last {WINDOW} requests", "summary")
        for route, recent in sorted(m.recent.items()):
            xs = list(recent)
            for q in QUANTILES:
                summary.add_sample("gsr_request_latency_seconds", {"route": route, "quantile": str(q)},
                                   quantile(xs, q))
            summary.add_sample("gsr_request_latency_seconds_count", {"route": route}, len(xs))
            summary.add_sample("gsr_request_latency_seconds_sum", {"route": route}, sum(xs))
        yield summary
        (name, digest), in_flight, usage = m.state()
        info = GaugeMetricFamily("gsr_program_info", "the program being served", labels=["name", "hash"])
        info.add_metric([name, digest], 1)
        yield info
        yield GaugeMetricFamily("gsr_in_flight_items", "items submitted and not yet scored", value=in_flight)
        counters = {
            "calls": ("gsr_judge_calls", "judge calls asked for (cache hits and merged calls included)"),
            "http_requests": ("gsr_judge_http_requests", "HTTP requests sent to the model server"),
            "cache_hits": ("gsr_judge_cache_hits", "judge calls answered from the judgment cache"),
            "merged": ("gsr_judge_merged", "judge calls merged into an identical call in flight"),
            "call_failures": ("gsr_judge_call_failures", "judge calls that failed after their retries"),
        }
        families = {key: CounterMetricFamily(n, doc, labels=["judge"]) for key, (n, doc) in counters.items()}
        tokens = CounterMetricFamily("gsr_judge_tokens", "model tokens spent", labels=["judge", "kind"])
        spend = CounterMetricFamily("gsr_judge_spend_usd", "dollars spent on model calls", labels=["judge"])
        spent = False
        for judge, counts in sorted(usage.items()):
            for key, family in families.items():
                if isinstance(counts.get(key), (int, float)):
                    family.add_metric([judge], counts[key])
            for kind in ("prompt", "completion"):
                if isinstance(counts.get(f"{kind}_tokens"), (int, float)):
                    tokens.add_metric([judge, kind], counts[f"{kind}_tokens"])
            for key in ("cost_usd", "spend_usd", "dollars"):
                if isinstance(counts.get(key), (int, float)):
                    spend.add_metric([judge], counts[key])
                    spent = True
                    break
        yield from families.values()
        yield tokens
        if spent:
            yield spend
