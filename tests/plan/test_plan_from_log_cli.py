"""`kvtool plan --from-log` as a command: its JSON says what was measured, derived and estimated, its table
says so in one line, bad input is one line and exit status 2, a model is found without the network, and it
costs about a plan's CPU."""

import json
import subprocess
import sys

import pytest
from from_log_cases import BESIDE, HERE, LOGS, QWEN2_7B, GiB, kv, plan, public_log
from hub_stand_in import HubStandIn
from typer.testing import CliRunner

from kvtool.cli.app import app


def test_the_json_says_what_was_measured_derived_and_estimated(tmp_path):
    _, report = plan(tmp_path, public_log(tmp_path, "s-14"), *BESIDE["s-14"], "--max-num-seqs", "256")
    facts = report["from_log"]
    assert {"kv_bytes_per_token", "num_blocks", "kv_cache_tokens", "fits", "memory", "model", "gpu"} <= report.keys()
    assert facts["vllm_version"] == "0.10.2" and facts["engine"] == "V1" and facts["gpu_memory"] == "measured"
    printed_parts = {"total_bytes", "weights_bytes", "activation_bytes", "non_torch_bytes", "kv_cache_bytes"}
    assert facts["measured"].keys() == printed_parts and not facts["derived"] and facts["estimated"] == []
    assert facts["measured"]["activation_bytes"] == pytest.approx(0.17 * GiB, abs=0.01 * GiB)  # the rounding
    assert facts["changed"] == {"max_num_seqs": {"log": 1, "now": 256}}
    assert facts["moved"]["activation_bytes"] > 0 and facts["answer"]["activation_bytes"] == "measured"


def test_without_the_gpu_s_memory_it_is_solved_from_the_log_and_with_it_the_rest_is(tmp_path):
    log = public_log(tmp_path, "s-01")
    _, alone = plan(tmp_path, log, *BESIDE["s-01"])
    # 81 GiB, not the catalog's 79.28: the estimate then misses by more than the log's rounding
    _, given = plan(tmp_path, log, *BESIDE["s-01"], "--gpu", "A100-80GB", "--gpu-mem", "81GiB")
    assert alone["from_log"]["derived"].keys() == {"total_bytes"}
    assert set(alone["from_log"]["estimated"]) == {"activation_bytes", "non_torch_bytes"}
    assert given["from_log"]["gpu_memory"] == "given" and given["memory"]["total_bytes"] == 81 * GiB
    assert given["from_log"]["derived"].keys() == {"activation_bytes", "non_torch_bytes"}
    derived = sum(given["from_log"]["derived"].values())
    requested = given["memory"]["requested_bytes"]
    assert derived == requested - round(14.2488 * GiB) - given["from_log"]["measured"]["kv_cache_bytes"]
    assert kv(alone) == kv(given) == given["from_log"]["measured"]["kv_cache_bytes"]


def test_a_gpu_given_beside_a_log_that_prints_or_names_its_own_is_another_unless_it_is_the_same_card(tmp_path):
    log = public_log(tmp_path, "s-14")  # 23.65 GiB printed
    _, same = plan(tmp_path, log, *BESIDE["s-14"], "--gpu", "RTX-4090")  # 23.6 GiB in the catalog
    _, bigger = plan(tmp_path, log, *BESIDE["s-14"], "--gpu-mem", "48GiB")
    assert same["memory"]["total_bytes"] == round(23.65 * GiB) and not same["from_log"]["changed"]
    assert kv(bigger) - kv(same) == pytest.approx(0.9 * (48 - 23.65) * GiB, abs=2)
    assert "answered for the given 48.00 GiB" in bigger["from_log"]["notes"][0]
    named = public_log(tmp_path, "s-11")  # names its H100 and prints no memory: H200 is another GPU
    _, h200 = plan(tmp_path, named, *BESIDE["s-11"], "--gpu", "H200")
    assert h200["from_log"]["gpu_memory"] == "catalog" and h200["from_log"]["changed"].keys() == {"gpu_memory_bytes"}


def test_the_table_says_in_one_line_what_the_log_measured(tmp_path):
    log = public_log(tmp_path, "s-01")
    args = ["--model", QWEN2_7B, "--gpu", "A100-80GB", "--gpu-mem", "81GiB"]
    result = CliRunner().invoke(app, ["plan", "--from-log", str(log), *args])
    lines = [line for line in result.stdout.splitlines() if line.startswith("from the log")]
    assert len(lines) == 1 and "measured weights, KV cache; derived activation peak, non-torch" in lines[0]
    assert "GPU memory given (A100-80GB)" in lines[0] and "weights (log)" in result.stdout


def test_a_log_that_disagrees_with_the_model_s_config_says_so(tmp_path):
    _, report = plan(tmp_path, public_log(tmp_path, "s-01"), "--model", "llama3.1-8b")
    assert any("check that --model is the model the log ran" in note for note in report["from_log"]["notes"])


TRUNCATED = (
    "INFO 08-16 02:01:57 [api_server.py:1755] vLLM API server version 0.10.0\n"
    "INFO 08-16 02:01:57 [cli_args.py:261] non-default args: {'model': 'Qwen/Qwen3-8B'}\n"
)
BAD_INPUT = {
    "empty": ("", [], "The start-up log is empty"),
    "another program's": ("Starting nginx\n[notice] 1#1: start worker processes\n", [], "This is not a vLLM log"),
    "truncated": (TRUNCATED, [], "The log stops before vLLM measured its memory"),
    "no memory lines": (
        "INFO 08-16 02:01:57 [api_server.py:1755] vLLM API server version 0.10.0\n"
        "INFO 08-16 02:01:57 [launcher.py:29] Available routes are:\n",
        [],
        "The log stops before vLLM measured its memory",
    ),
    "model not resolvable": (LOGS["s-01"]["log"], [], "The log's model 'Qwen2-7B-Instruct' is not"),
    "model not named": (LOGS["s-28"]["log"], [], "The log does not name its model"),
    "config with missing fields": (LOGS["s-01"]["log"], ["--model", "{bad}"], "is missing or has a bad"),
    "a share without the GPU's memory": (
        LOGS["s-01"]["log"],
        ["--model", QWEN2_7B, "--gpu-memory-utilization", "0.5"],
        "The log prints no GPU memory",
    ),
    "a setting the release refuses": (LOGS["s-20"]["log"], ["--kv-cache-dtype", "fp9"], "does not accept"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_line_and_status_2(tmp_path, case):
    text, args, message = BAD_INPUT[case]
    (tmp_path / "server.log").write_text(text)
    (tmp_path / "bad.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}))
    args = [arg.format(bad=tmp_path / "bad.json") for arg in args]
    result = CliRunner().invoke(app, ["plan", "--from-log", str(tmp_path / "server.log"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_missing_file_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["plan", "--from-log", str(tmp_path / "missing.log")])
    assert result.exit_code == 2 and "Cannot read the log file" in result.output


PROBE = """
import sys
from kvtool.cli.app import app
try:
    app({args!r})
except SystemExit:
    pass
print("HEAVY", sorted(m for m in ("torch", "transformers", "huggingface_hub") if m in sys.modules))
"""


def imported_heavy(args: list[str]) -> str:
    """What a fresh process running `kvtool ARGS` imported of the heavy libraries (and its output)."""
    run = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, timeout=60)
    return run.stdout + run.stderr


def test_from_log_stays_as_cheap_as_a_plan():
    """No torch, transformers or Hub client: what makes a command cost seconds instead of a plan's 0.2 s of CPU
    (reading the log and planning three times cost a few milliseconds; docs/plan.md gives the figures)."""
    log = HERE / "releases" / "0.21.0.log"
    output = imported_heavy(["plan", "--from-log", str(log), "--max-num-seqs", "512", "--json"])
    assert "HEAVY []" in output and '"from_log"' in output, output


TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
HUB_MODEL_LOG = """\
(APIServer pid=1) INFO 09-30 18:36:42 [api_server.py:1896] vLLM API server version 0.10.2
(APIServer pid=1) INFO 09-30 18:36:42 [utils.py:328] non-default args: {{'model': '{model}', 'max_model_len': 4096}}
(EngineCore_DP0 pid=2) INFO 09-30 18:36:54 [gpu_model_runner.py:2392] Model loading took 0.0054 GiB and 1.0 seconds
(EngineCore_DP0 pid=2) INFO 09-30 18:37:01 [gpu_worker.py:298] Available KV cache memory: 6.50 GiB
"""


def test_a_hub_model_planned_once_is_found_for_a_log_without_the_network(tmp_path, monkeypatch):
    hub = HubStandIn({"some-org/tiny-llama": {"config.json": json.dumps(TINY_LLAMA).encode()}})
    for name, value in (
        ("HF_ENDPOINT", hub.url),
        ("HF_HOME", str(tmp_path / "hf")),
        ("KVTOOL_CACHE_DIR", str(tmp_path)),
    ):
        monkeypatch.setenv(name, value)
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    assert CliRunner().invoke(app, ["plan", "--model", "some-org/tiny-llama", "--gpu-mem", "8GiB"]).exit_code == 0
    hub.close()
    for model, status in (("some-org/tiny-llama", 0), ("some-org/never-fetched", 2)):
        (tmp_path / "server.log").write_text(HUB_MODEL_LOG.format(model=model))
        result = CliRunner().invoke(app, ["plan", "--from-log", str(tmp_path / "server.log"), "--json"])
        assert result.exit_code == status, result.output
    assert "some-org/never-fetched' is not a local path, a catalog model or in the Hugging Face cache" in result.output
