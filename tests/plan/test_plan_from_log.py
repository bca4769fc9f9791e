"""`kvtool plan --from-log` on real and release-by-release vLLM start-up logs.

startup_logs/logs.jsonl holds 15 real start-up logs (vLLM 0.10 - 0.19) with what vLLM printed;
startup_logs/releases/ one start-up per release family (0.4.3 - 0.33.0) and expected.json. Three things are
held here:
- every log's own figures come back (its KV-cache memory, tokens or blocks, concurrency, start or not)
  within 1 %: the budget is the log's, so the only room is the rounding of its two-decimal figures and
  the KV arithmetic;
- an answer for other settings on the same machine lands within 5 % of the log that machine printed at
  those settings (pairs of real logs), and exactly where the arithmetic is exact (the release logs);
- bad input is one line and exit status 2.
The model is given with --model where the log's id is a local path kvtool cannot read (the logs' own
configs, or the published config.json fields below); a GPU only where the log names none and vLLM's default
scheduler limits for it matter (a sliding-window model).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.sizing.startup_log import read_startup_log

GiB = 1 << 30
HERE = Path(__file__).parent / "startup_logs"
PUBLIC = {record["id"][:4]: record for record in map(json.loads, (HERE / "logs.jsonl").read_text().splitlines())}
RELEASES = json.loads((HERE / "releases" / "expected.json").read_text())
QWEN2_7B = str(HERE / "configs" / "Qwen__Qwen2.5-7B-Instruct" / "config.json")
SAME_RUN = 0.01  # a log's own figures
SAME_MACHINE = 0.05  # another setting on the machine the log ran on
QWEN25_3B = {  # Qwen/Qwen2.5-3B config.json (the fields plan reads)
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
MISTRAL_7B_V02 = {  # mistralai/Mistral-7B-Instruct-v0.2 config.json: no sliding window, rope theta 1e6
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "sliding_window": None,
    "torch_dtype": "bfloat16",
}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True}  # TheBloke's
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
LLAVA_15_7B_AWQ = {  # llava-hf/llava-1.5-7b-hf with its text_config's implicit LlamaConfig defaults written out
    "architectures": ["LlavaForConditionalGeneration"],
    "model_type": "llava",
    "image_token_index": 32000,
    "text_config": {
        "model_type": "llama",
        "max_position_embeddings": 4096,
        "vocab_size": 32064,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "torch_dtype": "float16",
    },
    "vision_config": {
        "model_type": "clip_vision_model",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "image_size": 336,
        "patch_size": 14,
    },
    "vocab_size": 32064,
    "torch_dtype": "float16",
    "quantization_config": AWQ,
}
CONFIGS = {
    "qwen25_3b": QWEN25_3B,
    "mistral_gptq": {**MISTRAL_7B_V02, "quantization_config": GPTQ},
    "mistral_awq": {**MISTRAL_7B_V02, "quantization_config": AWQ},
    "llava_awq": LLAVA_15_7B_AWQ,
}
# What a log needs beside it: {name} is a config of CONFIGS, written to a file.
BESIDE = {
    **{key: ["--model", QWEN2_7B] for key in ("s-01", "s-02", "s-03", "s-04", "s-05")},
    "s-06": ["--gpu", "A100-80GB"],  # gpt-oss' sliding layers keep a window of A100's 2048-token batches
    "s-11": ["--model", str(HERE / "configs" / "Qwen__Qwen3-235B-A22B-FP8" / "config.json")],
    "s-12": ["--model", str(HERE / "configs" / "Qwen__Qwen3-32B" / "config.json")],
    "s-14": ["--model", "{qwen25_3b}"],
    "s-16": ["--model", "{mistral_gptq}"],
    "s-22": ["--model", "{llava_awq}"],
    "s-25": ["--model", str(HERE / "configs" / "Qwen__Qwen3-Coder-30B-A3B-Instruct" / "config.json")],
    "s-30": ["--model", "{qwen25_3b}"],
    "0.7.3": ["--model", "llama3.1-70b"],  # the AWQ checkpoint of Llama-3.1-70B
    "0.10.2": ["--model", "{mistral_awq}"],
    "0.15.1": ["--model", "mistral-small-24b"],  # 3.2's text model has 3.1's and 3's architecture
}
# Logs whose KV figures kvtool's KV arithmetic misses, whatever the budget: they must keep missing, so
# that a fix shows up here.
KNOWN = {
    "s-25": "vLLM 0.14 - 0.16 checks a pipeline stage's KV memory against all 48 layers of the model, kvtool "
    "against the stage's own: its estimated max_model_len is twice vLLM's",
    "0.26.0": "vLLM pads gemma-3's 52 sliding layers to 6 groups of 10 (its 10 full layers set the group "
    "size), and kvtool counts 52: 13 % more tokens than vLLM prints",
}


def plan(tmp_path, log: str | Path, *args: str) -> tuple[int, dict]:
    """`kvtool plan --from-log LOG ARGS --json`: the exit status and the report."""
    configs = {}
    for name, config in CONFIGS.items():
        configs[name] = tmp_path / f"{name}.json"
        configs[name].write_text(json.dumps(config))
    args = [arg.format(**configs) for arg in args]
    result = CliRunner().invoke(app, ["plan", "--from-log", str(log), *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def public_log(tmp_path, key: str) -> Path:
    path = tmp_path / f"{key}.log"
    path.write_text(PUBLIC[key]["log"])
    return path


def printed(key: str) -> dict:
    """What the log printed: KV memory (GiB), tokens, blocks (V0), concurrency, estimated length, start."""
    if key in PUBLIC:
        record = PUBLIC[key]
        failure = read_startup_log(record["log"]).failure  # the estimated length in vLLM's error
        figures = {
            "kv_gib": record["reported_available_kv_gib"],
            "tokens": record["reported_kv_tokens"],
            "concurrency": record["reported_max_concurrency"],
            "estimated_max_model_len": failure and failure.estimated_max_model_len,
        }
        return {**figures, "starts": record["startup_ok"]}
    expected = RELEASES[key]
    memory, failure = expected["memory"], expected.get("failure", {})
    figures = {
        "kv_gib": memory.get("available_kv_cache_memory_gib", failure.get("available_kv_cache_memory_gib")),
        "tokens": memory.get("kv_cache_size_tokens", failure.get("kv_cache_size_tokens")),
        "concurrency": memory.get("max_concurrency"),
        "estimated_max_model_len": failure.get("estimated_max_model_len"),
    }
    if expected["engine"] == "V0":
        figures["blocks"] = memory.get("num_gpu_blocks")
    return {**figures, "starts": not failure}


def answered(report: dict) -> dict:
    return {
        "kv_gib": report["memory"]["kv_cache_bytes"] / GiB,
        "tokens": report["kv_cache_tokens"],
        "concurrency": report["max_concurrency"],
        "estimated_max_model_len": report["safe_max_model_len"],
        "blocks": report["num_blocks"],
    }


def misses(report: dict, key: str) -> dict[str, float]:
    """Each figure the log printed, and how far the answer is from it."""
    ours = answered(report)
    return {name: ours[name] / value - 1 for name, value in printed(key).items() if value and name != "starts"}


ALL_LOGS = sorted(PUBLIC.keys() - {"s-28"}) + sorted(RELEASES)


def log_path(tmp_path, key: str) -> Path:
    return public_log(tmp_path, key) if key in PUBLIC else HERE / "releases" / f"{key}.log"


@pytest.mark.parametrize("key", ALL_LOGS)
def test_every_log_gives_back_its_own_figures(tmp_path, key):
    code, report = plan(tmp_path, log_path(tmp_path, key), *BESIDE.get(key, []))
    assert (code == 0) == printed(key)["starts"] == report["fits"]
    off = {name: miss for name, miss in misses(report, key).items() if abs(miss) > SAME_RUN}
    if key in KNOWN:
        assert off, f"now within 1 %: drop the known miss ({KNOWN[key]})"
    else:
        assert not off, off


PAIRS = [  # (log, settings, the log of the same machine and model at those settings)
    ("s-01", ["--gpu", "A100-80GB", "--gpu-memory-utilization", "0.5"], "s-02"),
    ("s-02", ["--gpu", "A100-80GB", "--gpu-memory-utilization", "0.25"], "s-01"),
    ("s-03", ["--gpu", "A100-80GB", "--gpu-memory-utilization", "0.5"], "s-04"),
    ("s-04", ["--gpu", "A100-80GB", "--gpu-memory-utilization", "0.25"], "s-03"),
    ("s-01", ["--gpu", "A100-80GB", "--tp", "2"], "s-03"),
    ("s-03", ["--gpu", "A100-80GB", "--tp", "1"], "s-01"),
    ("s-02", ["--gpu", "A100-80GB", "--num-gpus", "2"], "s-04"),
    ("s-04", ["--gpu", "A100-80GB", "--tp", "1"], "s-02"),
    ("s-01", ["--gpu", "A100-80GB", "--tp", "2", "--gpu-memory-utilization", "0.5"], "s-04"),
    ("s-14", [], "s-30"),  # the same flags three days apart: the noise floor of any answer
    ("s-30", [], "s-14"),
]


@pytest.mark.parametrize(("key", "settings", "other"), PAIRS, ids=[f"{k}-{' '.join(s)}-{o}" for k, s, o in PAIRS])
def test_another_setting_on_the_same_machine_lands_within_5_percent(tmp_path, key, settings, other):
    _, report = plan(tmp_path, public_log(tmp_path, key), *BESIDE[key], *settings)
    off = {name: miss for name, miss in misses(report, other).items() if abs(miss) > SAME_MACHINE}
    assert not off, off


# Two V0 runs of Llama-3.2-3B quoted in unslothai/notebooks@bdda2efc (tests/plan/test_public_startup_logs.py):
# a T4 under `vllm serve` (0.8.2) and an A100-40GB (0.8.1, V0 by VLLM_USE_V1=0, LoRA on) with 320 sequences.
# The memory lines are vLLM's as quoted; the flags line is written from the row's settings.
UNSLOTH_T4 = """\
INFO 03-27 10:00:00 [api_server.py:981] vLLM API server version 0.8.2
INFO 03-27 10:00:00 [api_server.py:982] args: Namespace(model='unsloth/Llama-3.2-3B-Instruct', dtype='float16', \
max_model_len=2048, gpu_memory_utilization=0.8938626454842437, max_num_seqs=192, max_num_batched_tokens=2048)
INFO 03-27 10:00:09 [llm_engine.py:241] Initializing a V0 LLM engine (v0.8.2) with config: \
model='unsloth/Llama-3.2-3B-Instruct', dtype=torch.float16, max_seq_len=2048
INFO 03-27 10:00:40 [worker.py:267] Memory profiling takes 6.12 seconds
INFO 03-27 10:00:40 [worker.py:267] the current vLLM instance can use total_gpu_memory (14.74GiB) x \
gpu_memory_utilization (0.89) = 13.18GiB
INFO 03-27 10:00:40 [worker.py:267] model weights take 6.02GiB; non_torch_memory takes 0.05GiB; PyTorch activation \
peak memory takes 0.90GiB; the rest of the memory reserved for KV Cache is 6.22GiB.
INFO 03-27 10:00:40 [executor_base.py:111] # cuda blocks: 3637, # CPU blocks: 1170
INFO 03-27 10:00:40 [executor_base.py:116] Maximum concurrency for 2048 tokens per request: 28.41x
"""
UNSLOTH_A100 = {"kv_gib": 23.46, "blocks": 13724, "activation_gib": 1.49}


def test_a_v0_activation_peak_moves_with_the_profile_batch_to_another_run(tmp_path):
    """V0 profiles max_num_seqs sequences: 192 -> 320 adds 128 rows of sampled logits to the peak."""
    log = tmp_path / "t4.log"
    log.write_text(UNSLOTH_T4)
    a100 = ["--gpu-mem", "39.56GiB", "--gpu-memory-utilization", "0.7908", "--max-num-seqs", "320", "--enforce-eager"]
    _, report = plan(tmp_path, log, "--model", "llama3.2-3b", *a100)
    activation = report["memory"]["activation_bytes"] / GiB
    assert 0.90 < activation and abs(activation / UNSLOTH_A100["activation_gib"] - 1) < 0.10
    assert abs(report["memory"]["kv_cache_bytes"] / GiB / UNSLOTH_A100["kv_gib"] - 1) < SAME_MACHINE
    assert abs(report["num_blocks"] / UNSLOTH_A100["blocks"] - 1) < SAME_MACHINE


def release(tmp_path, version: str, *args: str) -> dict:
    return plan(tmp_path, HERE / "releases" / f"{version}.log", *BESIDE.get(version, []), *args)[1]


def kv(report: dict) -> int:
    return report["memory"]["kv_cache_bytes"]


@pytest.mark.parametrize(("version", "total_gib"), [("0.6.6.post1", 79.15), ("0.26.0", 79.19), ("0.10.2", 23.56)])
def test_another_utilization_moves_the_kv_cache_by_that_share_of_the_printed_gpu(tmp_path, version, total_gib):
    before = release(tmp_path, version)
    after = release(tmp_path, version, "--gpu-memory-utilization", "0.5")
    share = 0.5 - before["memory"]["gpu_memory_utilization"]
    assert kv(after) - kv(before) == pytest.approx(share * total_gib * GiB, abs=2)


@pytest.mark.parametrize(("version", "graphs_gib"), [("0.21.0", 1.02), ("0.19.1", 0.62), ("0.33.0", 0.55)])
def test_enforce_eager_gives_the_kv_cache_the_graph_memory_the_release_took_off(tmp_path, version, graphs_gib):
    """0.20+ subtract their CUDA-graph estimate, and 0.19.1 does when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1
    (the 0.19.1 log says so)."""
    before, after = release(tmp_path, version), release(tmp_path, version, "--enforce-eager")
    assert kv(after) - kv(before) == round(graphs_gib * GiB)


def test_enforce_eager_changes_nothing_where_graphs_are_captured_after_the_kv_cache(tmp_path):
    log = public_log(tmp_path, "s-20")  # 0.19.1 with graph profiling off: the estimate is printed, not taken off
    assert kv(plan(tmp_path, log, "--enforce-eager")[1]) == kv(plan(tmp_path, log)[1])


def test_an_fp8_kv_cache_holds_twice_the_blocks_of_the_same_memory(tmp_path):
    before, after = release(tmp_path, "0.19.1"), release(tmp_path, "0.19.1", "--kv-cache-dtype", "fp8")
    assert kv(after) == kv(before) and after["num_blocks"] in (2 * before["num_blocks"], 2 * before["num_blocks"] + 1)


def test_half_the_length_doubles_the_concurrency_of_the_same_kv_cache(tmp_path):
    before, after = release(tmp_path, "0.21.0"), release(tmp_path, "0.21.0", "--max-model-len", "20480")
    assert kv(after) == kv(before) and after["max_concurrency"] == pytest.approx(2 * before["max_concurrency"], 1e-3)


def test_a_kv_cache_given_outright_is_the_kv_cache(tmp_path):
    assert kv(release(tmp_path, "0.21.0", "--kv-cache-memory", "10GiB")) == 10 * GiB


def test_twice_the_tensor_parallel_ranks_halve_the_weights_and_the_kv_per_token(tmp_path):
    before, after = release(tmp_path, "0.21.0"), release(tmp_path, "0.21.0", "--tp", "4")
    assert after["memory"]["weights_bytes"] == pytest.approx(30.59 * GiB / 2, abs=2)
    assert after["kv_bytes_per_token"] * 2 == before["kv_bytes_per_token"]
    assert after["from_log"]["changed"]["tp"] == {"log": 2, "now": 4}


def plain_plan_activation(*args: str) -> int:
    result = CliRunner().invoke(app, ["plan", *args, "--json"])
    return json.loads(result.stdout)["memory"]["activation_bytes"]


def test_a_v0_activation_peak_moves_with_max_model_len_by_the_estimate(tmp_path):
    """0.6.6 without chunked prefill profiles max_model_len tokens: half the length, half the profile batch;
    the printed peak moves by what plan's estimate moves."""
    moved = release(tmp_path, "0.6.6.post1", "--max-model-len", "8192")["from_log"]["moved"]["activation_bytes"]
    run = ["--model", "qwen2.5-14b", "--vllm-version", "0.6.6", "--gpu-mem", "79.15GiB", "--kv-cache-dtype", "fp8"]
    estimate = plain_plan_activation(*run, "--max-model-len", "8192") - plain_plan_activation(
        *run, "--max-model-len", "16384"
    )
    assert moved == estimate < 0


def test_a_v1_activation_peak_moves_with_max_num_batched_tokens_by_the_estimate(tmp_path):
    report = release(tmp_path, "0.10.2", "--max-num-batched-tokens", "8192")
    run = ["--model", str(tmp_path / "mistral_awq.json"), "--vllm-version", "0.10.2", "--gpu-mem", "23.56GiB"]
    estimate = plain_plan_activation(*run, "--max-num-batched-tokens", "8192") - plain_plan_activation(*run)
    assert report["from_log"]["moved"]["activation_bytes"] == estimate > 0


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
    _, given = plan(tmp_path, log, *BESIDE["s-01"], "--gpu", "A100-80GB")
    assert alone["from_log"]["derived"].keys() == {"total_bytes"}
    assert set(alone["from_log"]["estimated"]) == {"activation_bytes", "non_torch_bytes"}
    assert given["from_log"]["gpu_memory"] == "given" and given["memory"]["total_bytes"] == int(79.2 * GiB)
    assert given["from_log"]["derived"].keys() == {"activation_bytes", "non_torch_bytes"}
    derived = sum(given["from_log"]["derived"].values())
    requested = given["memory"]["requested_bytes"]
    assert derived == requested - round(14.2488 * GiB) - given["from_log"]["measured"]["kv_cache_bytes"]
    assert kv(alone) == kv(given) == given["from_log"]["measured"]["kv_cache_bytes"]


def test_the_table_says_in_one_line_what_the_log_measured(tmp_path):
    log = public_log(tmp_path, "s-01")
    result = CliRunner().invoke(app, ["plan", "--from-log", str(log), "--model", QWEN2_7B, "--gpu", "A100-80GB"])
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
    "model not resolvable": (PUBLIC["s-01"]["log"], [], "The log's model 'Qwen2-7B-Instruct' is not"),
    "model not named": (PUBLIC["s-28"]["log"], [], "The log does not name its model"),
    "config with missing fields": (PUBLIC["s-01"]["log"], ["--model", "{bad}"], "is missing or has a bad"),
    "a share without the GPU's memory": (
        PUBLIC["s-01"]["log"],
        ["--model", QWEN2_7B, "--gpu-memory-utilization", "0.5"],
        "The log prints no GPU memory",
    ),
    "a setting the release refuses": (PUBLIC["s-20"]["log"], ["--kv-cache-dtype", "fp9"], "does not accept"),
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
import sys, time
from kvtool.cli.app import app
try:
    app({args!r})
except SystemExit:
    pass
print("CPU", time.process_time())
print("HEAVY", sorted(m for m in ("torch", "transformers", "huggingface_hub") if m in sys.modules))
"""


def cpu_seconds(args: list[str]) -> tuple[float, str]:
    """The least CPU of three fresh processes, and what the last one imported."""
    runs = [
        subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, timeout=60)
        for _ in range(3)
    ]
    seconds = min(float(line.split()[1]) for run in runs for line in run.stdout.splitlines() if line.startswith("CPU"))
    return seconds, runs[-1].stdout + runs[-1].stderr


def test_from_log_stays_as_cheap_as_a_plan(tmp_path):
    """No torch, transformers or Hub client, and about a plan's CPU (0.1 s to 0.2 s on a quiet core, most of it
    Python and Typer starting): reading the log and planning three times cost a few milliseconds."""
    log = HERE / "releases" / "0.21.0.log"
    from_log, output = cpu_seconds(["plan", "--from-log", str(log), "--max-num-seqs", "512", "--json"])
    plain, _ = cpu_seconds(["plan", "--model", "qwen3-32b", "--gpu", "H100", "--tp", "2", "--json"])
    assert "HEAVY []" in output, output
    assert from_log < plain + 0.1 and from_log < 0.5, (from_log, plain)
