"""Reading a live vLLM or kvtool server's Prometheus /metrics: the page, the window, the checklist's alerts.

names    -> which metric each quantity is, by vLLM generation (V0, V1)
page     -> one /metrics page parsed with prometheus_client into per-quantity values
scrape   -> fetching the page (httpx), with one-line errors
window   -> two pages apart in time: rates, counter deltas, p50/p99 from histogram bucket deltas
alerts   -> the checklist's thresholds, evaluated on a window, with computed fixes
rules    -> the same checklist as Prometheus alerting rules and a Grafana dashboard
"""
