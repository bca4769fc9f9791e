"""`kvtool profiles list / show`: the shipped matrix, YAML, and the equivalent vLLM command and config."""

import subprocess
import sys

import yaml
from typer.testing import CliRunner

from kvtool.cli.app import app

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, ["profiles", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_list_shows_every_profile_with_its_limits():
    output = invoke("list")
    for name, max_model_len in [
        ("chat-gateway", "4096"),
        ("long-form-agent", "8192"),
        ("document-qa", "8192"),
        ("multi-gpu-synthesis", "16384"),
    ]:
        row = next(line for line in output.splitlines() if line.startswith(name + " "))
        assert max_model_len in row.split()


def test_show_yaml_round_trips_the_settings():
    data = yaml.safe_load(invoke("show", "long-form-agent"))
    assert (data["max_model_len"], data["max_tokens"], data["kv_cache_dtype"], data["max_num_seqs"]) == (
        8192,
        4096,
        "fp8",
        32,
    )
    assert data["overflow"] in ("reject", "clamp") and 0 < data["gpu_memory_utilization"] <= 1


def test_show_vllm_prints_a_vllm_serve_command_with_the_profile_flags():
    output = invoke("show", "multi-gpu-synthesis", "--format", "vllm", "--model", "meta-llama/Llama-3.1-70B-Instruct")
    command = output.split("\n#")[0].replace("\\\n", " ").split()
    assert command[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"]
    flags = dict(zip(command[3::2], command[4::2]))
    assert flags["--tensor-parallel-size"] == "4" and flags["--max-model-len"] == "16384"
    assert flags["--kv-cache-dtype"] == "fp8" and flags["--max-num-seqs"] == "64"


def test_show_vllm_config_is_yaml_with_long_flag_names():
    config = yaml.safe_load(invoke("show", "document-qa", "--format", "vllm-config"))
    assert config["max-model-len"] == 8192 and config["kv-cache-dtype"] == "auto"
    assert config["max-num-batched-tokens"] >= config["max-num-seqs"]


def test_show_accepts_a_users_yaml_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("description: my traffic\nmax_model_len: 2048\nmax_tokens: 256\nmax_num_seqs: 8\n")
    data = yaml.safe_load(invoke("show", str(path)))
    assert data["max_model_len"] == 2048 and data["max_num_seqs"] == 8


def test_unknown_profile_is_one_line_with_a_suggestion():
    result = subprocess.run(
        [sys.executable, "-m", "kvtool", "profiles", "show", "chat-gatway"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "Did you mean 'chat-gateway'" in result.stderr and "Traceback" not in result.stderr
