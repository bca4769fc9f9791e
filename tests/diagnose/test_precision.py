"""An error outranks a symptom (errors.py): a whole server log or a script pasted beside a failure of another kind
(NCCL, drivers, chat templates, ports, schemas, tokenizers, the Hub) holds stats lines of a full KV cache or code
without max_tokens; diagnose names no memory cause for it. Each piece is in the format its source prints it."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES

SERVING = (
    "(APIServer pid=1) INFO 11-29 08:00:00 [api_server.py:1885] vLLM API server version 0.11.0\n"
    "(APIServer pid=1) INFO 11-29 08:00:00 [utils.py:233] non-default args: {'model': 'Qwen/Qwen2.5-7B-Instruct', "
    "'max_model_len': 32768}\n"
    "(APIServer pid=1) INFO:     Application startup complete.\n"
    '(APIServer pid=1) INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
)
# a KV cache over 90 % full with requests waiting, as each release's stats logger prints it
STATS = {
    "0.4.3": "INFO 06-01 10:00:00 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "512.3 tokens/s, Running: 96 reqs, Swapped: 0 reqs, Pending: 31 reqs, GPU KV cache usage: 97.0%, CPU KV cache "
    "usage: 0.0%.\n",
    "0.7.2": "INFO 02-10 10:00:00 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "512.3 tokens/s, Running: 96 reqs, Swapped: 0 reqs, Pending: 31 reqs GPU KV cache usage: 97.0%, CPU KV cache "
    "usage: 0.0%.\n",
    "0.11.0": "(APIServer pid=1) INFO 11-29 09:00:00 [loggers.py:127] Engine 000: Avg prompt throughput: 9000.0 "
    "tokens/s, Avg generation throughput: 800.0 tokens/s, Running: 200 reqs, Waiting: 57 reqs, GPU KV cache usage: "
    "99.6%, Prefix cache hit rate: 4.0%\n",
    "0.33.0": "(APIServer pid=1) INFO 01-10 09:00:00 [loggers.py:259] Engine 000: Avg prompt throughput: 9000.0 "
    "tokens/s, Avg generation throughput: 800.0 tokens/s, Running: 200 reqs, Waiting: 57 reqs, Preemptions: 3, GPU "
    "KV cache usage: 99.6%, Prefix cache hit rate: 4.0%\n",
    "near full": "(APIServer pid=1) INFO 11-29 09:00:10 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 "
    "tokens/s, Avg generation throughput: 800.0 tokens/s, Running: 200 reqs, Waiting: 0 reqs, GPU KV cache usage: "
    "98.2%, Prefix cache hit rate: 4.0%\n",
    "random prompts": "$ vllm bench serve --model Qwen/Qwen2.5-7B-Instruct --dataset-name random --num-prompts 1000\n"
    "INFO 09-26 11:20:52 [loggers.py:127] Engine 000: Avg prompt throughput: 6102.8 tokens/s, Avg generation "
    "throughput: 1221.7 tokens/s, Running: 259 reqs, Waiting: 535 reqs, GPU KV cache usage: 82.3%, Prefix cache hit "
    "rate: 32.2%\n",
}
# a default output cap: code, a request and its cut answer, what people write, a request log
CAPS = {
    "script": "from vllm import LLM, SamplingParams\nllm = LLM(model='Qwen/Qwen2.5-7B-Instruct')\n"
    "sampling_params = SamplingParams(temperature=0.8, top_p=0.95)\noutputs = llm.generate(prompts, sampling_params)\n",
    "request": 'curl localhost:8000/v1/completions -d \'{"model": "qwen", "prompt": "Write a story about"}\'\n'
    '{"choices":[{"text":" a dragon who","finish_reason":"length"}]}\n',
    "prose": "The answers are truncated. max_tokens is not set in our client.\n",
    "request log": "INFO 05-01 14:39:06 [logger.py:41] Received request cmpl-1: prompt: 'Hi', params: "
    "SamplingParams(n=1, temperature=0.7, max_tokens=16, min_tokens=0), prompt_token_ids: None, lora_request: None.\n",
}
ERRORS = {
    "nccl": "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/'
    'pynccl_wrapper.py", line 291, in NCCL_CHECK\n'
    '[rank0]:     raise RuntimeError(f"NCCL error: {error_str}")\n'
    "[rank0]: RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
    "nccl torch": "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n",
    "chat template": "(APIServer pid=1) ERROR 11-29 09:01:00 [serving_chat.py:263] Error in preprocessing prompt "
    "inputs\n(APIServer pid=1) ERROR 11-29 09:01:00 [serving_chat.py:263] Traceback (most recent call last):\n"
    '(APIServer pid=1) ERROR 11-29 09:01:00 [serving_chat.py:263]   File "/usr/local/lib/python3.12/dist-packages/'
    'jinja2/sandbox.py", line 394, in call\n'
    "(APIServer pid=1) ERROR 11-29 09:01:00 [serving_chat.py:263] jinja2.exceptions.TemplateError: Conversation "
    "roles must alternate user/assistant/user/assistant/...\n",
    "port": "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in "
    "use\n",
    "port oserror": "OSError: [Errno 98] Address already in use\n",
    "tokenizer": "Exception: data did not match any variant of untagged enum ModelWrapper at line 757479 column 3\n",
    "tokenizer oserror": "OSError: Can't load tokenizer for 'Qwen/Qwen2.5-7B-Instruct'. If you were trying to load "
    "it from 'https://huggingface.co/models', make sure you don't have a local directory with the same name.\n",
    "driver": "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your "
    "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n",
    "driver 803": "Error 803: system has unsupported display driver / cuda driver combination\n",
    "illegal access": "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.\n",
    "hub 401": "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6745c1b2-1e7a9e3d)\n"
    "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/"
    "config.json.\n",
    "schema": "(APIServer pid=53846) ERROR 05-04 03:28:46 [api_router.py:72] ValueError: The provided JSON schema "
    "contains features not supported by xgrammar.\n",
    "extra field 400": "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"[{'type': "
    "'extra_forbidden', 'loc': ('body', 'max_completion_tokens'), 'msg': 'Extra inputs are not permitted', "
    "'input': 800}]\", 'type': 'BadRequestError', 'param': None, 'code': 400}\n",
    "engine died": "(APIServer pid=1) ERROR 11-29 09:02:00 [async_llm.py:480] AsyncLLM output_handler failed.\n"
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
    "root cause.\n",
}


def memory_findings(text: str) -> list[str]:
    return [f.category for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


def all_findings(text: str) -> list[str]:
    return [f.category for f in diagnose_text(text).findings]


@pytest.mark.parametrize("symptom", [*STATS.values(), *CAPS.values()], ids=[*STATS, *CAPS])
def test_each_symptom_alone_is_a_finding(symptom):
    assert all_findings(SERVING + symptom) != []


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS)
@pytest.mark.parametrize("symptom", [*STATS.values(), *CAPS.values()], ids=[*STATS, *CAPS])
def test_an_error_of_another_kind_outranks_a_symptom(symptom, error):
    assert all_findings(SERVING + symptom + error) == []
    assert all_findings(error + SERVING + symptom) == []  # wherever the error is


@pytest.mark.parametrize(
    "symptom, consequence",
    [
        (STATS["0.11.0"], "openai.APITimeoutError: Request timed out.\n"),
        (STATS["0.33.0"], "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"),
        (CAPS["request"], "json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 10 (char 9)\n"),
        (CAPS["script"], "pydantic_core._pydantic_core.ValidationError: 1 validation error for Answer\n  Invalid JSON: "
         "EOF while parsing a string at line 1 column 40 [type=json_invalid]\n"),
    ],
)  # fmt: skip
def test_an_error_the_symptom_causes_keeps_it(symptom, consequence):
    assert all_findings(SERVING + symptom + consequence) != []


def test_a_memory_failure_in_the_paste_keeps_the_symptoms_beside_it():
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 "
        "GiB of which 1.10 GiB is free.\n"
    )
    found = memory_findings(SERVING + STATS["0.11.0"] + ERRORS["engine died"] + ERRORS["nccl"] + oom)
    assert sorted(found) == ["cuda_oom_runtime", "preemption"]


def test_an_error_a_recogniser_reads_is_not_one_of_another_kind():
    """vLLM's preemption warning returned inside an error body is the symptom's own line."""
    body = (
        '{"error": {"message": "Sequence group cmpl-7 is preempted by PreemptionMode.RECOMPUTE mode because there '
        'is not enough KV cache space. total_num_cumulative_preemption=106", "type": "BadRequestError", "code": 400}}\n'
    )
    assert all_findings(body) == ["preemption"]


@pytest.mark.parametrize(
    "line",
    [
        "INFO 05-01 14:39:06 [logger.py:41] Received request chatcmpl-1: prompt: 'Why does my code raise "
        "TypeError: unsupported operand?', params: SamplingParams(n=1, max_tokens=512), prompt_token_ids: None.\n",
        '{"model": "qwen", "messages": [{"role": "user", "content": "Explain KeyError: \'x\'"}], "max_tokens": 200}\n',
        'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n',
    ],
)
def test_a_prompt_about_an_error_or_a_bare_status_is_no_error(line):
    assert all_findings(SERVING + STATS["0.11.0"] + line) == ["preemption"]


def test_an_error_far_from_any_other_line_of_interest_is_still_seen():
    """In a log of several MiB, the error is read where it is: no anchor of a failure brings it along."""
    access = '(APIServer pid=1) INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    text = SERVING + STATS["0.11.0"] + access * 40_000 + ERRORS["port oserror"] + access * 40_000
    assert len(text) > 2 * (1 << 20)
    assert all_findings(text) == []
    assert all_findings(text.replace(ERRORS["port oserror"], "")) == ["preemption"]
