import socket
import subprocess
import sys

from typer.testing import CliRunner

from kvtool.cli.app import app

runner = CliRunner()


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kvtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvtool", *args], capture_output=True, text=True, timeout=60)


def test_help_lists_the_option_groups():
    result = runner.invoke(app, ["bench", "--help"])
    assert result.exit_code == 0
    for panel in ("Server", "Workload", "Load", "Metrics", "Output", "Offline"):
        assert panel in result.output


def test_no_server_names_the_url_and_how_to_start_one():
    url = f"http://127.0.0.1:{unused_port()}"
    result = kvtool("bench", "--url", url, "-n", "1")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert url in lines[0] and "kvtool serve --profile chat-gateway" in lines[0]
    assert "Traceback" not in result.stderr


def test_bad_options_are_usage_errors():
    bad = (
        ["--sweep", "batch=1,2"],
        ["--slo", "ttft=fast"],
        ["--percentiles", "101"],
        ["--request-rate", "0"],
        ["--chart", "x.png"],
        ["--offline", "--sweep", "max-tokens=1,2"],
        ["--dtype", "float32"],
        ["--offline", "--dtype", "float64"],
    )
    for args in bad:
        result = runner.invoke(app, ["bench", "-n", "1", *args])
        assert result.exit_code == 2 and "kvtool: error:" in result.stderr, args


def test_missing_dataset_file_is_one_line(tmp_path):
    result = kvtool("bench", "--dataset", str(tmp_path / "nope.jsonl"), "-n", "1")
    assert result.returncode == 2
    assert "dataset file not found" in result.stderr and "Traceback" not in result.stderr
