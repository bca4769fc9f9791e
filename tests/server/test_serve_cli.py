"""`kvtool serve` as a command: refusing to start, and handing over to `vllm serve`."""

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.errors import ExitCode


@pytest.mark.slow
def test_refuses_to_start_with_vllms_message_and_the_safe_length(smollm2_dir):
    budget = 16 << 20
    result = CliRunner().invoke(
        app, ["serve", "--max-model-len", "8192", "--kv-cache-memory", "16MiB", "--dtype", "bfloat16", "--port", "1"]
    )
    assert result.exit_code == ExitCode.STARTUP_FAILED, result.output
    output = " ".join(result.output.split())
    safe = KVCacheSpec(resolve_model_spec("smollm2")).estimate_max_model_len(budget)
    assert "To serve at least one request with the model's max seq len (8192)" in output
    assert f"the estimated maximum model length is {safe}." in output
    assert f"restart with --max-model-len {safe}, or raise --kv-cache-memory" in output


def run_kvtool(*args: str, path: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PATH": path} if path else {}), **(env or {})}
    return subprocess.run([sys.executable, "-m", "kvtool", *args], capture_output=True, text=True, env=env, timeout=60)


def serve_with_fake_vllm(tmp_path, *args: str) -> list[str]:
    """The command line `kvtool serve --backend vllm ARGS` execs, as a `vllm` on PATH that echoes it sees it."""
    fake_vllm = tmp_path / "vllm"
    fake_vllm.write_text('#!/bin/sh\necho "vllm $*"\n')
    fake_vllm.chmod(0o755)
    result = run_kvtool("serve", "--backend", "vllm", *args, path=f"{tmp_path}:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_backend_vllm_execs_vllm_serve_with_the_profiles_flags(tmp_path):
    fake_vllm = tmp_path / "vllm"
    fake_vllm.write_text('#!/bin/sh\necho "vllm $* --key-from-env $VLLM_API_KEY"\n')
    fake_vllm.chmod(0o755)
    result = run_kvtool(
        "serve",
        "--backend",
        "vllm",
        "--profile",
        "multi-gpu-synthesis",
        "--max-num-seqs",
        "16",
        "--model",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--port",
        "9000",
        "--api-key",
        "sekret",
        path=f"{tmp_path}:{os.environ['PATH']}",
    )
    assert result.returncode == 0, result.stderr
    argv = result.stdout.split()
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags["--tensor-parallel-size"] == "4" and flags["--max-model-len"] == "16384"
    assert flags["--max-num-seqs"] == "16" and flags["--port"] == "9000" and flags["--host"] == "127.0.0.1"
    assert flags["--key-from-env"] == "sekret" and "--api-key" not in flags  # not visible in `ps`


def test_backend_vllm_passes_the_flags_that_change_answers(tmp_path):
    argv = serve_with_fake_vllm(
        tmp_path, "--max-logprobs", "-1", "--enable-prompt-tokens-details", "--return-tokens-as-token-ids"
    )
    assert argv[argv.index("--max-logprobs") + 1] == "-1"
    assert {"--enable-prompt-tokens-details", "--return-tokens-as-token-ids"} <= set(argv)
    assert "--enable-force-include-usage" not in argv


def test_a_max_logprobs_below_minus_one_is_one_line():
    result = run_kvtool("serve", "--max-logprobs", "-2")
    assert result.returncode == 2 and "max_logprobs must be -1 (the vocabulary) or at least 0, got -2." in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("given, passed", [("8k", "8000"), ("8K", "8192"), ("auto", "-1"), ("-1", "-1")])
def test_backend_vllm_passes_max_model_len_as_vllm_reads_it(tmp_path, given, passed):
    argv = serve_with_fake_vllm(tmp_path, "--max-model-len", given)
    assert argv[argv.index("--max-model-len") + 1] == passed


def test_backend_vllm_passes_trust_request_chat_template_on_as_a_switch(tmp_path):
    fake_vllm = tmp_path / "vllm"
    fake_vllm.write_text('#!/bin/sh\necho "vllm $*"\n')
    fake_vllm.chmod(0o755)
    path = f"{tmp_path}:{os.environ['PATH']}"
    trusted = run_kvtool("serve", "--backend", "vllm", "--trust-request-chat-template", path=path)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout.split()[-1] == "--trust-request-chat-template"
    assert "--trust-request-chat-template" not in run_kvtool("serve", "--backend", "vllm", path=path).stdout


def test_backend_vllm_refuses_a_profile_the_model_cannot_run(tmp_path):
    fake_vllm = tmp_path / "vllm"
    fake_vllm.write_text("#!/bin/sh\necho vllm\n")
    fake_vllm.chmod(0o755)
    result = run_kvtool(
        "serve", "--backend", "vllm", "--profile", "multi-gpu-synthesis", path=f"{tmp_path}:{os.environ['PATH']}"
    )  # SmolLM2 has 9 attention heads; tp 4
    assert result.returncode == 2 and "must be divisible by tensor parallel size (4)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_backend_vllm_without_vllm_is_one_clear_line(tmp_path):
    result = run_kvtool("serve", "--backend", "vllm", path=str(tmp_path))
    assert result.returncode == ExitCode.USAGE
    assert result.stderr.count("\n") == 1 and "`vllm` is not on PATH" in result.stderr


@pytest.mark.slow
def test_a_max_model_len_beyond_the_model_is_refused_before_loading():
    result = run_kvtool("serve", "--max-model-len", "100000")
    assert result.returncode == ExitCode.USAGE
    assert (
        "max_model_len (100000) is greater than the derived max_model_len (max_position_embeddings=8192"
        in result.stderr
    )


def test_an_unknown_tool_call_parser_is_refused_with_the_choices():
    result = CliRunner().invoke(app, ["serve", "--tool-call-parser", "pythonic"])
    assert result.exit_code == 2
    assert "hermes" in result.output and "llama3_json" in result.output


def fake_vllm_on_path(tmp_path) -> str:
    """A `vllm` that prints its argv and the key it got from the environment."""
    fake_vllm = tmp_path / "vllm"
    fake_vllm.write_text('#!/bin/sh\necho "vllm $* --key-from-env $VLLM_API_KEY"\n')
    fake_vllm.chmod(0o755)
    return f"{tmp_path}:{os.environ['PATH']}"


@pytest.mark.parametrize(
    "environment, key",
    [({"VLLM_API_KEY": "vllms"}, "vllms"), ({"VLLM_API_KEY": "vllms", "KVTOOL_API_KEY": "kvtools"}, "kvtools")],
)
def test_the_api_key_is_kvtools_variable_else_vllms(tmp_path, environment, key):
    clean = {name: "" for name in ("KVTOOL_API_KEY", "VLLM_API_KEY")}
    result = run_kvtool("serve", "--backend", "vllm", path=fake_vllm_on_path(tmp_path), env={**clean, **environment})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == key


def test_several_api_keys_go_on_vllms_command_line(tmp_path):
    clean = {name: "" for name in ("KVTOOL_API_KEY", "VLLM_API_KEY")}
    keys = ["--api-key", "first", "--api-key", "second"]
    result = run_kvtool("serve", "--backend", "vllm", *keys, path=fake_vllm_on_path(tmp_path), env=clean)
    assert result.returncode == 0, result.stderr
    argv = result.stdout.split()
    assert argv[argv.index("--api-key") + 1 : argv.index("--api-key") + 3] == ["first", "second"]
    assert argv[-1] == "--key-from-env"  # VLLM_API_KEY holds one key: it is left empty


def test_backend_vllm_passes_the_server_flags_on(tmp_path):
    socket = tmp_path / "vllm.sock"
    switches = [
        "--enable-server-load-tracking",
        "--enable-prompt-embeds",
        "--enable-request-id-headers",
        "--enable-tokenizer-info-endpoint",
    ]
    flags = ["--root-path", "/llm/", "--uds", str(socket), *switches]
    result = run_kvtool("serve", "--backend", "vllm", *flags, path=fake_vllm_on_path(tmp_path))
    assert result.returncode == 0, result.stderr
    argv = result.stdout.split()
    assert argv[argv.index("--root-path") + 1] == "/llm" and argv[argv.index("--uds") + 1] == str(socket)
    assert all(switch in argv for switch in switches)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--root-path", "llm"], "--root-path must start with '/', got 'llm'. Use --root-path /llm."),
        (["--uds", "/no/such/folder/kvtool.sock"], "--uds /no/such/folder/kvtool.sock: the folder /no/such/folder"),
    ],
)
def test_a_bad_root_path_or_socket_path_is_one_line_before_loading(flags, message):
    result = CliRunner().invoke(app, ["serve", *flags])
    assert result.exit_code == ExitCode.USAGE
    assert message in " ".join(result.output.split()) and result.output.count("\n") == 1
