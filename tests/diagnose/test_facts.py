"""The fact layer (facts.py, layouts.py): every number with the quantity it measures, whatever the layout."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.facts import KEYED, WORDED, read_line, template
from kvtool.engine.diagnosis.layouts import Layouts


def read(text: str) -> dict:
    """Each quantity's last value in `text`."""
    return {fact.quantity: fact.value for fact in read_line(text, 0)}


@pytest.mark.parametrize(
    "text",
    [
        "vllm serve Qwen/Qwen2.5-7B --max-model-len 32768 --gpu-memory-utilization 0.85 --tensor-parallel-size 2",
        "vllm serve Qwen/Qwen2.5-7B --max-model-len=32768 --gpu-memory-utilization=0.85 -tp 2",
        "llm = LLM(model='Qwen/Qwen2.5-7B', max_model_len=32768, gpu_memory_utilization=0.85, tensor_parallel_size=2)",
        "engine_kwargs: {'max_model_len': 32768, 'gpu_memory_utilization': 0.85, 'tensor_parallel_size': 2}",
        '{"max_model_len": 32768, "gpu_memory_utilization": 0.85, "tensor_parallel_size": 2}',
        "['--max-model-len', '32768', '--gpu-memory-utilization', '0.85', '--tensor-parallel-size', '2']",
        "lm_eval --model vllm --model_args pretrained=Qwen/Qwen2.5-7B,max_model_len=32768,gpu_memory_utilization=0.85,"
        "tensor_parallel_size=2",
        "actor_rollout_ref.rollout.max_model_len=32768 actor_rollout_ref.rollout.gpu_memory_utilization=0.85 "
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "I start it with max_model_len 32768, gpu_memory_utilization set to 0.85 and tp 2",
        "max-model-len: 32768\ngpu-memory-utilization: 0.85\ntensor-parallel-size: 2",
    ],
    ids=["flags", "flags with =", "LLM()", "dict repr", "JSON", "Python list", "lm-eval", "verl", "prose", "YAML"],
)
def test_the_launch_reads_alike_in_every_layout(text):
    context = diagnose_text(text).context
    assert (context.max_model_len, context.gpu_memory_utilization, context.tensor_parallel_size) == (32768, 0.85, 2)


@pytest.mark.parametrize(
    "text",
    [
        '        - args:\n          - --model\n          - /models/llama\n          - --max-model-len\n          - "8192"\n'
        '          - --gpu-memory-utilization\n          - "0.95"\n',
        "args: [\n  '--max-model-len',\n  '8192',\n  '--gpu-memory-utilization',\n  '0.95',\n]\n",
        "(WorkerDict pid=1) vllm args:\n(WorkerDict pid=1) --max-model-len\n(WorkerDict pid=1) 8192\n"
        "(WorkerDict pid=1) --gpu-memory-utilization\n(WorkerDict pid=1) 0.95\n",
    ],
    ids=["kubernetes args", "Python list one per line", "Ray worker lines"],
)
def test_a_flag_and_its_value_on_two_lines_are_read_together(text):
    context = diagnose_text(text).context
    assert (context.max_model_len, context.gpu_memory_utilization) == (8192, 0.95)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("the context length is 8192 and the prompt has 9000 tokens", {"max_model_len": 8192}),
        ("KV cache usage reached 98.5% with 64 running and 120 waiting requests", {"kv_cache_usage_percent": 98.5}),
        ("TPOT jumps from 25 ms to 1.2 s", {"tpot_ms": 1200.0}),
        ("only 3.1 GiB free of 24 GB", {"free_gib": 3.1, "total_gib": 24.0}),
        (
            "GPU 0 has a total capacity of 23.56 GiB of which 122.56 MiB is free",
            {"total_gib": 23.56, "free_gib": 0.1197},
        ),
        ("显存 24 GB，上下文长度 32768，KV 缓存使用率 97%", {"total_gib": 24.0, "max_model_len": 32768}),
        ("gpu_memory_utilization is already 0.9 (90%)", {"gpu_memory_utilization": 0.9}),
        ("utilization 92% of the GPU", {"gpu_memory_utilization": 0.92}),
    ],
)
def test_prose_numbers_are_named_by_the_words_around_them(text, expected):
    facts = read(text)
    assert {name: facts.get(name) for name in expected} == expected


def test_a_key_wins_over_words_and_says_how_it_was_read():
    facts = read_line("max_model_len=4096, the context length is 4096", 0)
    assert [(fact.quantity, fact.how) for fact in facts] == [("max_model_len", KEYED), ("max_model_len", WORDED)]


def test_a_table_header_names_each_column():
    table = (
        "| concurrency | KV cache usage (%) | TPOT (ms) | waiting |\n"
        "|---|---|---|---|\n"
        "| 32 | 71.0 | 28 | 0 |\n"
        "| 64 | 96.5 | 190 | 41 |\n"
    )
    layouts = Layouts()
    facts = [fact for line in table.splitlines() for fact in layouts.feed(line, 0)]
    usage = [fact.value for fact in facts if fact.quantity == "kv_cache_usage_percent"]
    assert usage == [71.0, 96.5] and [f.value for f in facts if f.quantity == "tpot_ms"] == [28, 190]


def test_a_csv_table_too():
    layouts = Layouts()
    lines = ["concurrency,gpu_kv_cache_usage,median_tpot_ms", "16,0.62,31.5", "128,0.99,410.2"]
    facts = [fact for line in lines for fact in layouts.feed(line, 0)]
    assert [fact.value for fact in facts if fact.quantity == "kv_cache_usage_percent"] == [62.0, 99.0]


def test_lines_of_one_shape_state_the_same_facts_at_the_same_places():
    """The readers are digit-blind: a shape's template holds for every line of it (the scanner relies on it)."""
    line, other = (
        "Running: 8 reqs, Waiting: 3 reqs, GPU KV cache usage: 91.6%",
        "Running: 7 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%",
    )
    shape = "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 00.0%"
    assert [fact.span for fact in read_line(line, 0)] == [span for _, _, span, _, _ in template(shape)]
    assert [fact.span for fact in read_line(other, 0)] == [span for _, _, span, _, _ in template(shape)]


def test_a_token_id_list_counts_tokens():
    facts = read(
        "RequestOutput(prompt_token_ids=[2, 31414, 328], outputs=[CompletionOutput(token_ids=(280, 16, 127))])"
    )
    assert (facts["prompt_tokens"], facts["completion_tokens"]) == (3, 3)


@pytest.mark.parametrize("text", ["line 482, in step", "Processed prompts: 100%|█| 12/12", "Python 3.12.4", "pid=5839"])
def test_numbers_nothing_names_are_no_facts(text):
    assert read_line(text, 0) == []
