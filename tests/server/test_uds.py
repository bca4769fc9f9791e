"""`kvtool serve --uds PATH`: the API on a unix domain socket instead of TCP, as vLLM's --uds."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from kvtool.engine.server.defaults import VLLM_API_VERSION

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def socket_client(smollm2_dir):
    with tempfile.TemporaryDirectory() as folder:  # short: a socket path has a length limit
        socket, log_path = Path(folder) / "kvtool.sock", Path(folder) / "serve.log"
        with open(log_path, "w") as log:
            args = ("--uds", str(socket), "--max-model-len", "256", "--max-num-seqs", "4", "--kv-cache-memory", "16MiB")
            process = subprocess.Popen([sys.executable, "-m", "kvtool", "serve", *args], stdout=log, stderr=log)
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://kvtool", timeout=120)
        try:
            wait_healthy(client, process, log_path)
            yield client
        finally:
            process.terminate()
            process.wait(30)


def wait_healthy(client: httpx.Client, process: subprocess.Popen, log_path: Path, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if client.get("/health").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.5)
    raise RuntimeError(f"kvtool serve --uds did not become healthy; its log:\n{log_path.read_text()[-4000:]}")


def test_the_api_answers_on_the_socket(socket_client):
    assert socket_client.get("/version").json()["version"] == VLLM_API_VERSION
    reply = socket_client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 3}).json()
    assert reply["usage"]["completion_tokens"] == 3
