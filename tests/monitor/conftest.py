"""Static /metrics pages (hand-written in vLLM 0.6.3's V0 and 0.33's V1 format) served by a real HTTP server."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

PAGES = Path(__file__).parent / "pages"


class _Pages(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, str]]] = {}

    def do_GET(self):
        status, body = self.routes.get(self.path, (404, '{"detail":"Not Found"}'))
        if self.path.startswith("/secure/") and self.headers.get("Authorization") != "Bearer sesame":
            status, body = 401, '{"error": "Unauthorized"}'
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def page_server():
    """Base URL of a 127.0.0.1 server: /v0/metrics and /v1/metrics serve the static pages, /secure/metrics
    the V1 page to `Authorization: Bearer sesame` only, /html/metrics HTML, /plain/metrics Prometheus text
    without vllm: names."""
    _Pages.routes = {
        "/v0/metrics": (200, (PAGES / "vllm_v0_6_3.prom").read_text()),
        "/v1/metrics": (200, (PAGES / "vllm_v1_0_33.prom").read_text()),
        "/secure/metrics": (200, (PAGES / "vllm_v1_0_33.prom").read_text()),
        "/v1/v1/models": (200, '{"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "max_model_len": 8192}]}'),
        "/html/metrics": (200, "<html><body>Welcome</body></html>"),
        "/plain/metrics": (200, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"),
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
