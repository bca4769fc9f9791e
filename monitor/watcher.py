"""Repeated scrapes of one server: the readings within the window, the snapshot and its alerts."""

import time
from collections import deque

from kvtool.monitor.alerts import Alert, evaluate
from kvtool.monitor.checklist import TTFT_P99_SECONDS
from kvtool.monitor.scrape import Scraper
from kvtool.monitor.window import Reading, Snapshot, snapshot


class Watcher:
    def __init__(self, scraper: Scraper, window_s: float, ttft_objective: float = TTFT_P99_SECONDS):
        self.scraper, self.window_s, self.ttft_objective = scraper, window_s, ttft_objective
        self.history: deque[Reading] = deque()
        self.max_model_len = scraper.max_model_len()

    def step(self) -> Snapshot:
        """Scrape once and return the snapshot over the readings of the last `window_s` seconds."""
        reading = self.scraper.reading()
        self.history.append(reading)
        while len(self.history) > 2 and self.history[1].taken_at <= reading.taken_at - self.window_s:
            self.history.popleft()
        return snapshot(self.scraper.url, list(self.history))

    def alerts(self, view: Snapshot) -> list[Alert]:
        return evaluate(view, self.max_model_len, self.ttft_objective)

    def once(self, interval_s: float) -> Snapshot:
        """Two scrapes `interval_s` apart: enough for rates and histogram deltas."""
        self.step()
        time.sleep(interval_s)
        return self.step()

    def to_dict(self, view: Snapshot) -> dict:
        return {
            **view.to_dict(),
            "max_model_len": self.max_model_len,
            "alerts": [alert.to_dict() for alert in self.alerts(view)],
        }
