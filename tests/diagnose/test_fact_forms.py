"""The fact layer on the forms fresh reports take: Prometheus and Grafana output, `vllm bench serve` blocks, numbers
with their units in odd places, other languages, a terminal's hard wrap at 80 columns."""

import textwrap

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.facts import read_line
from kvtool.engine.diagnosis.layouts import Layouts


def read(text: str) -> dict:
    """Each quantity's last value in one line."""
    return {fact.quantity: fact.value for fact in read_line(text, 0)}


def table(text: str) -> list[tuple[str, object]]:
    layouts = Layouts()
    return [(fact.quantity, fact.value) for line in text.splitlines() for fact in layouts.feed(line, 0)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('vllm:num_requests_waiting{engine="0",model_name="qwen"} 45.0', {"num_waiting": 45}),
        ("vllm:kv_cache_usage_perc stuck at 1.0 all afternoon", {"kv_cache_usage_percent": 100.0}),
        ("vllm:num_preemptions_total keeps going up (12,408 after an hour)", {"num_preemptions": 12408}),
        ("gpu_cache_usage_perc is hovering around 0.97", {"kv_cache_usage_percent": 97.0}),
        ("histogram vllm:time_to_first_token_seconds_sum 0.84", {}),  # a histogram's sum is no latency
        ("Mean TTFT (ms):                          18234.11", {"ttft_ms": 18234.11}),
        ("P99 TPOT (ms):   412.37", {"tpot_ms": 412.37}),
    ],
    ids=["exposition", "prose, a verb", "prose, a counter", "hovering", "a histogram sum", "bench TTFT", "bench TPOT"],
)
def test_metric_names_and_benchmark_lines_read_as_their_quantity(text, expected):
    facts = read(text)
    assert {name: facts.get(name) for name in expected} == expected
    if not expected:
        assert "ttft_ms" not in facts


@pytest.mark.parametrize(
    "text, quantity, value",
    [
        (
            "| concurrency | peak KV usage | preemptions |\n|---|---|---|\n| 64 | 100% | 1284 |",
            "kv_cache_usage_percent",
            100,
        ),
        (
            '"Time","vllm:kv_cache_usage_perc{model_name=""llama""}","rate(vllm:num_preemptions_total[1m])"\n'
            '"2025-11-18 09:17:00","0.999","11.2"',
            "preemptions_per_s",
            11.2,
        ),
        (
            "time,vllm:num_requests_running,vllm:num_requests_waiting\n2025-12-03T10:02:00Z,9,97",
            "num_waiting",
            97,
        ),
        (
            '"Time","histogram_quantile(0.99, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])) by (le))"\n'
            '"09:17","58.4"',
            "ttft_ms",
            58400.0,
        ),
        ("pid, process_name, used_memory [MiB]\n18233, /usr/bin/python3, 30718 MiB", "process_gib", 29.998),
    ],
    ids=["markdown, the unit in the cells", "grafana csv, a rate", "prometheus csv", "a quantile in seconds", "smi"],
)
def test_a_table_column_names_its_numbers_whatever_the_header_form(text, quantity, value):
    assert (quantity, pytest.approx(value, rel=1e-3)) in table(text)


def test_a_benchmark_total_is_no_prompt_length():
    facts = read("Total input tokens:                      1024000")
    assert "prompt_tokens" not in facts


@pytest.mark.parametrize(
    "text, expected",
    [
        ("we serve it with a 16k context", {"max_model_len": 16384}),
        ("--max-model-len 32K --gpu-memory-utilization 0.9", {"max_model_len": 32768, "gpu_memory_utilization": 0.9}),
        ("max_model_len=128k, only 24G VRAM", {"max_model_len": 131072, "total_gib": 24.0}),
        ("prompts of about 6k tokens", {"prompt_tokens": 6000}),
        ("it runs at 0.9 util on an 80GB card", {"gpu_memory_utilization": 0.9}),
        (
            "コンテキスト長 32768 で起動、KV キャッシュ使用率 99%、待ち 40 件",
            {"max_model_len": 32768, "num_waiting": 40},
        ),
        ("컨텍스트 길이 8192, KV 캐시 사용률 98%, 대기 35", {"max_model_len": 8192, "kv_cache_usage_percent": 98}),
        ("longitud de contexto de 8192 tokens, uso de la caché KV 97%", {"max_model_len": 8192}),
        ("Kontextlänge 16384, KV-Cache-Auslastung 99%", {"max_model_len": 16384, "kv_cache_usage_percent": 99}),
        ("длина контекста 32768, свободно 3.1 GiB из 24 GiB", {"max_model_len": 32768, "free_gib": 3.1}),
        ("comprimento de contexto 4096, 2.5 GiB livres", {"max_model_len": 4096, "free_gib": 2.5}),
        ("vllm:kv_cache_usage_perc está en 0.99 y vllm:num_requests_waiting en 140", {"num_waiting": 140}),
        ("max_model_len 设置为 32768", {"max_model_len": 32768}),
        ("kv_cache_usage_perc ist bei 0.98", {"kv_cache_usage_percent": 98.0}),
        ("free memory on device is 5.5 of 23.6 GiB", {"free_gib": 5.5, "total_gib": 23.6}),
        (
            '{"metric":{"__name__":"vllm:num_requests_waiting","instance":"a:8000"},"value":[1733400000.1,"212"]}',
            {"num_waiting": 212},
        ),
        ('{__name__="vllm:kv_cache_usage_perc", instance="a:8000"}  0.997', {"kv_cache_usage_percent": 99.7}),
    ],
    ids=[
        "16k",
        "32K flag",
        "128k and 24G",
        "6k is 6000",
        "util after the number",
        "japanese",
        "korean",
        "spanish",
        "german",
        "russian",
        "portuguese",
        "spanish link words",
        "chinese link words",
        "german link words",
        "x of y GiB",
        "prometheus api",
        "console",
    ],
)
def test_a_number_is_read_as_its_quantity_whatever_its_form(text, expected):
    """Units in odd places (16k, 32K, 24G, 0.9 util), words in other languages, and a key linked to its value by
    words of another language, a label set, Prometheus's query output."""
    facts = read(text)
    assert {name: facts.get(name) for name in expected} == expected


MESSAGE = (
    "ValueError: To serve at least one request with the model's max seq len (131072), (7.27 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (3.9 GiB). Based on the available memory, the estimated "
    "maximum model length is 69632. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
    "CPU backend) or decreasing `max_model_len` when initializing the engine."
)


@pytest.mark.parametrize("prefix", ["", "(EngineCore pid=8812) ERROR 08-02 22:17:40 [core.py:1136] ", "vllm-1  | "])
def test_a_message_hard_wrapped_at_80_columns_is_joined_back(prefix):
    text = prefix + MESSAGE
    wrapped = "\n".join(text[i : i + 80] for i in range(0, len(text), 80))
    finding = diagnose_text(wrapped).findings[0]
    assert finding.category == "kv_cache_too_small_at_startup"
    assert (finding.numbers["kv_needed_gib"], finding.numbers["estimated_max_model_len"]) == (7.27, 69632)


def test_a_soft_wrap_at_80_columns_keeps_its_words_apart():
    """A short paste wrapped at spaces also has lines of exactly 80 characters: joined with a space, not glued."""
    text = (
        "You passed 110592 input characters and requested 1010 output tokens. However, the model's context length is "
        "only 12288 tokens, resulting in a maximum input length of 11288 tokens (at most 86016 characters). Please "
        "reduce the length of the input prompt."
    )
    finding = diagnose_text(textwrap.fill(text, 80)).findings[0]
    assert (finding.numbers["max_model_len"], finding.numbers["max_input_tokens"]) == (12288, 11288)


def test_nvidia_smi_rows_give_each_process_its_memory():
    rows = [
        "|    0   N/A  N/A     18233      C   /usr/bin/python3                          30718MiB |",
        "|    0   N/A  N/A      1873      G   /usr/lib/xorg/Xorg                          412MiB |",
        "|    0   N/A  N/A      2051      G   /usr/bin/gnome-shell                        188MiB |",
    ]
    facts = [fact for index, row in enumerate(rows) for fact in Layouts().feed(row, index)]
    assert [fact.value for fact in facts] == pytest.approx([29.998, 0.4023, 0.1836], rel=1e-3)
    joined = diagnose_text("nvidia-smi:\n" + "\n".join(rows)).context.facts.of("process_gib")
    assert len(joined) == 3  # however the paste's lines are joined, each row is its own


@pytest.mark.parametrize(
    "text, quantity",
    [
        (
            "Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 100.0% ... we send 120k-token documents",
            "num_waiting",
        ),
        ("we have only 16 requests running at most", "completion_tokens"),
        ("llama-3.1-8b-instruct running on one card", "num_running"),
        ('vllm:num_requests_waiting{engine="0"} 45 from http://vllm:8000/metrics', "num_waiting"),
    ],
    ids=["words of another quantity stand between", "only, not of tokens", "a number in a name", "a label, a port"],
)
def test_words_name_only_the_numbers_they_reach(text, quantity):
    """Each number the line states of `quantity` is one the text means: 0 or 2 waiting or running, 45 waiting."""
    assert {fact.value for fact in read_line(text, 0) if fact.quantity == quantity} <= {0, 2, 45}
