"""Reports of the kinds fresh reports take, each kind written in at least three forms (English prose, Chinese,
Spanish, Russian or Korean prose, a Markdown or CSV table, JSON lines, a trainer's metrics, a compose file, a
launcher's command): a 400 from a chat UI whose output cap fills the context; answers cut at a cap no vLLM default
names (a request log's round count, a workflow tool's usage block, a trainer's clipped completions, LangChain's
BaseOpenAI subclasses); a start-up that failed right after its KV cache line, or at the one length tried past the
KV cache; memory held elsewhere retold without vLLM's words; an out-of-memory error that came after it worked;
preemption quoted loosely or shown by a benchmark sweep; SchedulerConfig's refusal with its detail cut off. Beside
them, the look-alikes each mechanism must leave alone."""

import pytest
from diagnose_form_checks import check_cause_and_numbers, check_no_memory_or_length_cause, written_in_three_forms

from kvtool.engine.diagnosis import diagnose_text

CASES = {
    "request-aiohttp-compose": (
        "request_too_long",
        {"max_model_len": 8192, "completion_tokens": 8192},
        "docker-compose.yml:\n  vllm:\n    image: vllm/vllm-openai:v0.10.1\n    command: --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.9\n\nIn Open WebUI I set Max Tokens (num_predict) to 8192 for this model. Now every message fails with:\naiohttp.client_exceptions.ClientResponseError: 400, message='Bad Request', url='http://vllm:8000/v1/chat/completions'\nWith the default setting it works.",
    ),
    "request-zh-ui": (
        "request_too_long",
        {"max_model_len": 4096, "completion_tokens": 4096},
        "启动参数：vllm serve THUDM/glm-4-9b-chat --max-model-len 4096 --trust-remote-code\n在前端把最大输出长度调成了 4096 之后，每次对话都报 HTTP 400，改回 1024 就正常了。这是为什么？",
    ),
    "request-es-prose": (
        "request_too_long",
        {"max_model_len": 16384, "completion_tokens": 16000},
        "Lanzo el servidor con `vllm serve mistralai/Mistral-Small-24B-Instruct-2501 --max-model-len 16384`.\nEn la interfaz puse max_new_tokens = 16000 y ahora todas las peticiones devuelven HTTP 400 (Bad Request). No aparece ningún mensaje de vLLM en el cliente.",
    ),
    "request-table": (
        "request_too_long",
        {"max_model_len": 32768, "completion_tokens": 32768},
        "| setting | value |\n|---|---|\n| vLLM --max-model-len | 32768 |\n| UI maximum output length | 32768 |\n| result | 400 Bad Request |",
    ),
    "request-ru": (
        "request_too_long",
        {"max_model_len": 8192, "completion_tokens": 8000},
        "Сервер: vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\nВ интерфейсе выставил num_predict 8000, и теперь каждый запрос падает с ошибкой 400 Bad Request. Логи vLLM ничего не показывают.",
    ),
    "cut-log-csv": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256, "completion_tokens": 256},
        'request_id,prompt_tokens,completion_tokens,finish_reason\nreq-1,812,256,length\nreq-2,1330,256,length\nreq-3,644,256,length\nreq-4,2010,256,length\npayload: {"model": "qwen", "messages": [{"role": "user", "content": "..."}]}\nThe answers all end mid sentence.',
    ),
    "cut-log-md": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 1024, "completion_tokens": 1024},
        "| id | prompt_tokens | completion_tokens | finish_reason |\n|---|---|---|---|\n| 1 | 3021 | 1024 | length |\n| 2 | 1775 | 1024 | length |\n| 3 | 2290 | 1024 | length |\n所有回答都被截断了，请求里没有设置 max_tokens。",
    ),
    "cut-log-jsonl": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512, "completion_tokens": 512},
        '{"id": "a1", "usage": {"prompt_tokens": 901, "completion_tokens": 512, "total_tokens": 1413}, "finish_reason": "length"}\n{"id": "a2", "usage": {"prompt_tokens": 1402, "completion_tokens": 512, "total_tokens": 1914}, "finish_reason": "length"}\n{"id": "a3", "usage": {"prompt_tokens": 377, "completion_tokens": 512, "total_tokens": 889}, "finish_reason": "length"}',
    ),
    "cut-log-dify": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512, "completion_tokens": 512},
        'Dify 工作流里接了 vLLM (OpenAI-API-compatible)，长文总结总是说到一半就停了。节点输出:\n{"usage": {"prompt_tokens": 5120, "completion_tokens": 512, "total_tokens": 5632}, "finish_reason": "length"}\nvLLM 启动参数 --max-model-len 32768，我没有在 Dify 里改过最大标记。',
    ),
    "cut-log-n8n-en": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 1024, "completion_tokens": 1024},
        'n8n OpenAI Chat Model node pointing to our vLLM server (--max-model-len 65536). The report generation always stops mid-sentence. The execution data shows:\n"tokenUsage": {"completionTokens": 1024, "promptTokens": 3312, "totalTokens": 4336}, "finish_reason": "length"\nI never set a maximum anywhere.',
    ),
    "cut-trainer-trl": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        "GRPO training of Qwen2.5-1.5B with use_vllm=True. The format reward stays near 0, completions never close the </answer> tag.\n{'loss': 0.0, 'completions/mean_length': 256.0, 'completions/max_length': 256.0, 'completions/clipped_ratio': 1.0, 'rewards/format_reward/mean': 0.0, 'epoch': 0.02}",
    ),
    "cut-trainer-verl": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 1024},
        "verl PPO with vllm rollout, the reward is flat.\nstep:40 - response_length/mean:1023.6 - response_length/max:1024.000 - response_length/clip_ratio:0.984 - critic/score/mean:0.02\nmost answers don't finish",
    ),
    "cut-trainer-zh-table": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512},
        "用 OpenRLHF 训练，格式奖励一直接近 0，回答都没有写完。\n| step | response_length/mean | response_length/max | response_length/clip_ratio |\n|---|---|---|---|\n| 10 | 511.2 | 512 | 0.97 |\n| 20 | 512.0 | 512 | 1.0 |",
    ),
    "cut-client-vllmopenai-190": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'from langchain_community.llms.vllm import VLLMOpenAI\nllm = VLLMOpenAI(openai_api_base="http://10.0.0.3:8000/v1", model_name="Qwen/Qwen2.5-14B-Instruct", openai_api_key="EMPTY", temperature=0.2)\nEvery answer is always about 190 words and stops after a paragraph and a half, mid-sentence.',
    ),
    "cut-client-azure": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'from langchain_openai import AzureOpenAI\nllm = AzureOpenAI(azure_endpoint="http://gateway/v1", deployment_name="llama")\nrespuestas cortadas a la mitad, siempre más o menos 190 palabras.',
    ),
    "kv-after-line-gb10-fp8": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 5.2},
        "DGX Spark (GB10), vllm serve nvidia/Llama-3.3-70B-Instruct-FP8 --max-model-len 131072 --gpu-memory-utilization 0.9\n(EngineCore_DP0 pid=211) INFO 11-02 14:20:01 [gpu_worker.py:298] Available KV cache memory: 5.2 GiB\n(EngineCore_DP0 pid=211) ERROR 11-02 14:20:03 [core.py:708] EngineCore failed to start.\n(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ),
    "kv-after-line-unknown-model-config": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_available_gib": 2.1},
        "vllm serve acme/SuperModel-30B --max-model-len 65536\nconfig.json: num_hidden_layers=48, num_key_value_heads=8, head_dim=128, torch_dtype=bfloat16\nINFO [gpu_worker.py:298] Available KV cache memory: 2.1 GiB\nERROR [core.py:708] EngineCore failed to start.",
    ),
    "kv-after-line-unknown-model-no-config": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 262144, "kv_available_gib": 3.4},
        "vllm serve someorg/custom-moe-a3b --max-model-len 262144 --gpu-memory-utilization 0.85\nINFO 09-01 [gpu_worker.py:276] Available KV cache memory: 3.40 GiB\nERROR 09-01 [core.py:700] EngineCore failed to start.\nRuntimeError: Engine core initialization failed. See root cause above.",
    ),
    "kv-lengths-tried-table": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_cache_tokens": 48912},
        "I tried several --max-model-len values:\n| --max-model-len | result | GPU KV cache size |\n|---|---|---|\n| 16384 | starts | 48,912 tokens |\n| 32768 | starts | 48,912 tokens |\n| 65536 | fails | - |",
    ),
    "kv-lengths-tried-prose": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 40960, "kv_cache_tokens": 36224},
        "With --max-model-len 16384 it starts and logs GPU KV cache size: 36,224 tokens. With --max-model-len 32768 it also starts. With --max-model-len 40960 the engine fails to start.",
    ),
    "held-es-smi": (
        "gpu_memory_held_by_others",
        {"gpu_memory_utilization": 0.9},
        "Al arrancar vllm serve Qwen/Qwen2.5-7B-Instruct --gpu-memory-utilization 0.9 me dice que la memoria libre en el dispositivo es menor que la utilización deseada.\n+-----------------------------------------------------------------------------------------+\n| Processes:                                                                              |\n|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |\n|=========================================================================================|\n|    0   N/A  N/A      1873      G   /usr/lib/xorg/Xorg                            412MiB |\n|    0   N/A  N/A      2051      G   /usr/bin/gnome-shell                          188MiB |\n|    0   N/A  N/A      4410      G   /usr/lib/firefox/firefox                      1523MiB |\n+-----------------------------------------------------------------------------------------+\nLa GPU es una RTX 4090 de 24 GB.",
    ),
    "held-zh-two-serves": (
        "gpu_memory_held_by_others",
        {"gpu_memory_utilization": 0.85},
        "同一张卡上起两个服务：\nCUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-1.5B-Instruct --port 8001 --gpu-memory-utilization 0.85\nCUDA_VISIBLE_DEVICES=0 vllm serve BAAI/bge-m3 --port 8002 --gpu-memory-utilization 0.85\n第二个启动时报错：设备上的空闲显存小于期望的 gpu memory utilization。",
    ),
    "held-en-two-serves": (
        "gpu_memory_held_by_others",
        {"gpu_memory_utilization": 0.85},
        "CUDA_VISIBLE_DEVICES=1 vllm serve meta-llama/Llama-3.2-3B-Instruct --port 8000 --gpu-memory-utilization 0.85 &\nCUDA_VISIBLE_DEVICES=1 vllm serve intfloat/e5-mistral-7b-instruct --port 8001 --gpu-memory-utilization 0.85 &\nThe second one dies at startup saying free memory on the device is less than the desired GPU memory utilization.",
    ),
    "held-ru-smi": (
        "gpu_memory_held_by_others",
        {"gpu_memory_utilization": 0.95},
        "vllm serve google/gemma-2-9b-it --gpu-memory-utilization 0.95 не запускается: свободной памяти на устройстве меньше, чем требуемая утилизация.\n|    0   N/A  N/A      2231      G   /usr/lib/xorg/Xorg                            650MiB |\n|    0   N/A  N/A      2480      G   /usr/bin/gnome-shell                          310MiB |\n|    0   N/A  N/A      5102      C   python3                                      2048MiB |",
    ),
    "oom-after-it-worked-vl-video": (
        "cuda_oom_runtime",
        {},
        'Serving Qwen/Qwen2.5-VL-7B-Instruct. 1-2 minute videos are fine, a 10 minute one kills the server:\nTraceback (most recent call last):\n  File "/usr/local/lib/python3.12/site-packages/vllm/model_executor/models/qwen2_5_vl.py", line 1102, in forward\n    image_embeds = self.visual(pixel_values, grid_thw=grid_thw)\n  File "/usr/local/lib/python3.12/site-packages/vllm/model_executor/models/qwen2_5_vl.py", line 640, in forward\n    hidden_states = blk(hidden_states, cu_seqlens=cu_seqlens)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 6.12 GiB is free.',
    ),
    "oom-after-it-worked-ru-steps": (
        "cuda_oom_runtime",
        {},
        'Первые ~40 шагов всё нормально, потом падает с OOM:\n  File "/opt/vllm/vllm/model_executor/models/llama.py", line 350, in forward\n    hidden_states, residual = layer(positions, hidden_states, residual)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.',
    ),
    "oom-after-it-worked-ko": (
        "cuda_oom_runtime",
        {},
        '짧은 입력은 잘 되는데 긴 문서를 넣으면 서버가 죽습니다:\n  File "/usr/lib/python3/site-packages/vllm/model_executor/models/qwen2.py", line 320, in forward\n    hidden_states = self.mlp(hidden_states)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 0 has a total capacity of 47.50 GiB of which 2.10 GiB is free.',
    ),
    "oom-after-it-worked-rl-colocate": (
        "cuda_oom_runtime",
        {},
        'verl GRPO with vllm rollout colocated (actor_rollout_ref.rollout.gpu_memory_utilization=0.6). After about 120 steps it crashes in update_weights:\n  File "/workspace/verl/workers/sharding_manager/fsdp_vllm.py", line 180, in __enter__\n    self.inference_engine.wake_up()\n  File "/usr/local/lib/python3.10/site-packages/vllm/model_executor/model_loader/utils.py", line 70, in load_weights\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.15 GiB of which 880.00 MiB is free.',
    ),
    "preempted-quoted-es": (
        "preemption",
        {},
        "Con 64 usuarios concurrentes la latencia se dispara. En los logs aparece que las secuencias son preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space, y total_num_cumulative_preemption sigue subiendo: 51, 120, 344.",
    ),
    "preempted-quoted-zh": (
        "preemption",
        {},
        "压测时日志里一直有 preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space 的警告，吞吐上不去。",
    ),
    "preempted-sweep-bench": (
        "preemption",
        {"request_concurrency": 128, "kv_tokens": 98304},
        "INFO [kv_cache_utils.py:716] GPU KV cache size: 98,304 tokens\nINFO [kv_cache_utils.py:720] Maximum concurrency for 8,192 tokens per request: 12.00x\n\nvllm bench serve --max-concurrency 32 --random-input-len 4096 --random-output-len 4096\n============ Serving Benchmark Result ============\nMaximum request concurrency:             32\nRequest throughput (req/s):              0.41\nOutput token throughput (tok/s):         1702.33\n==================================================\nvllm bench serve --max-concurrency 128 --random-input-len 4096 --random-output-len 4096\n============ Serving Benchmark Result ============\nMaximum request concurrency:             128\nRequest throughput (req/s):              0.42\nOutput token throughput (tok/s):         1711.90\n==================================================\nWhy doesn't throughput scale?",
    ),
    "step-launcher-xinference": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096},
        "xinference launch --model-name bge-reranker-v2-m3 --model-type rerank --model-engine vllm --max_num_batched_tokens 4096\nRuntimeError: 1 validation error for SchedulerConfig",
    ),
    "step-ray-ru": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096, "max_model_len": 16384},
        'from ray.serve.llm import LLMConfig\nllm_config = LLMConfig(model_loading_config=dict(model_id="qwen", model_source="Qwen/Qwen2.5-7B-Instruct"), engine_kwargs=dict(max_model_len=16384, max_num_batched_tokens=4096, enable_chunked_prefill=False, tensor_parallel_size=1))\nПри запуске ошибка валидации: max_num_batched_tokens меньше, чем max_model_len, и нужно включить chunked prefill или увеличить значение.',
    ),
    "cut-client-anyscale-ko": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'from langchain_community.llms import Anyscale\nllm = Anyscale(anyscale_api_base="http://10.0.0.9:8000/v1", model_name="qwen")\n답변이 항상 중간에 끊겨요. 요약이 끝나지 않습니다.',
    ),
    "kv-lengths-tried-csv": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_cache_tokens": 104560},
        "max_model_len,started,kv_cache_tokens\n32768,yes,104560\n65536,yes,104560\n131072,failed,",
    ),
    "preempted-quoted-ru": (
        "preemption",
        {},
        "При 100 одновременных запросах задержка растёт, в логах постоянно: preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. Что делать?",
    ),
    "preempted-sweep-bench-ko": (
        "preemption",
        {"request_concurrency": 64},
        "GPU KV cache size: 65,536 tokens\n--random-input-len 2048 --random-output-len 2048\n동시성 16: Output token throughput (tok/s): 910.2, --max-concurrency 16\n동시성 64: Output token throughput (tok/s): 915.7, --max-concurrency 64\n동시성을 올려도 처리량이 늘지 않습니다.",
    ),
    "step-launcher-dash-zh": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 32768},
        "xinference launch --model-engine vllm --model-name qwen2.5-instruct --size-in-billions 7 --max-model-len 32768 --max-num-batched-tokens 2048\n启动失败，只有一行：1 validation error for SchedulerConfig",
    ),
    "preempted-sweep-table": (
        "preemption",
        {"request_concurrency": 256, "max_concurrency": 18.5},
        "Maximum concurrency for 4,096 tokens per request: 18.50x\n"
        "| --max-concurrency | Output token throughput (tok/s) |\n|---|---|\n| 64 | 3120 |\n| 256 | 3180 |",
    ),
    "step-ray-en": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 8192, "max_model_len": 32768},
        "llm_config = LLMConfig(model_loading_config=dict(model_id='q', model_source='Qwen/Qwen2.5-7B-Instruct'),\n"
        "    engine_kwargs=dict(max_model_len=32768, max_num_batched_tokens=8192, enable_chunked_prefill=False))\n"
        "The deployment fails with a validation error: max_num_batched_tokens is smaller than max_model_len.",
    ),
}
LOOK_ALIKES = {
    # a 400 whose cap leaves most of the context: something else was refused
    "request-cap-far-below": "vllm serve m --max-model-len 32768\nMax Tokens (num_predict) is 1024 in the UI, and "
    "tool calls fail with HTTP 400 Bad Request: invalid tool_choice",
    # the payload sets the cap the answers stopped at: no default
    "cut-log-cap-sent": '{"model": "m", "messages": [], "max_tokens": 512}\n'
    '{"usage": {"prompt_tokens": 90, "completion_tokens": 512}, "finish_reason": "length"}\n'
    '{"usage": {"prompt_tokens": 70, "completion_tokens": 512}, "finish_reason": "length"}',
    # a prompt that filled the context ended the answer, not a cap
    "cut-log-context-full": "--max-model-len 4096\n"
    '{"usage": {"prompt_tokens": 3584, "completion_tokens": 512}, "finish_reason": "length"}',
    # few completions clipped: the cap is not what holds the reward down
    "cut-trainer-few-clipped": "{'completions/max_length': 1024.0, 'completions/clipped_ratio': 0.04, 'reward': 0.61}",
    # the server came up after its KV cache line
    "kv-after-line-came-up": "vllm serve acme/custom-30b --max-model-len 65536\nINFO Available KV cache memory: 2.1 GiB"
    "\nINFO:     Application startup complete.",
    # two launches on different cards
    "held-two-cards": "CUDA_VISIBLE_DEVICES=0 vllm serve a --gpu-memory-utilization 0.85 &\n"
    "CUDA_VISIBLE_DEVICES=1 vllm serve b --gpu-memory-utilization 0.85 &\nthe second fails: EngineCore failed to start.",
    # a sweep within what the KV cache holds at once
    "preempted-sweep-within": "Maximum concurrency for 8,192 tokens per request: 40.00x\n"
    "--max-concurrency 8: Output token throughput (tok/s): 700\n--max-concurrency 32: Output token throughput (tok/s): 2100",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_report_told_in_this_form_gets_its_cause_and_numbers(name):
    check_cause_and_numbers(name, CASES[name])


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_a_look_alike_gets_no_memory_or_length_cause(name):
    check_no_memory_or_length_cause(name, LOOK_ALIKES[name])


KINDS = ("request", "cut-log", "cut-trainer", "cut-client", "kv-after-line", "kv-lengths-tried", "held",
         "oom-after-it-worked", "preempted-quoted", "preempted-sweep", "step")  # fmt: skip


def test_every_kind_is_written_in_three_forms():
    assert written_in_three_forms(CASES, KINDS)


def test_a_start_up_that_failed_after_its_kv_line_says_it_is_the_likely_cause():
    finding = diagnose_text(CASES["kv-after-line-unknown-model-no-config"][2]).findings[0]
    assert any("likely cause" in note for note in finding.notes)


def test_a_weight_sync_places_the_weight_loading_it_calls_while_serving():
    finding = diagnose_text(CASES["oom-after-it-worked-rl-colocate"][2]).findings[0]
    assert finding.stage == "runtime"
