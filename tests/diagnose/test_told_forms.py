"""Failures whose message is missing, cut off or retold: the facts a paste states on different lines (the launch,
the client's settings, the reporter's words, nvidia-smi, a Grafana panel) and a sign that it failed. Each kind is
written in at least three forms (English prose, another language, a table or a wrapper's form), and beside each the
look-alike a rule must leave alone."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES
from kvtool.engine.diagnosis.values import to_number

K8S_DESCRIBE = '$ kubectl get pods\nNAME                    READY   STATUS             RESTARTS      AGE\nvllm-7d9c8b5f4-x2kqp    0/1     CrashLoopBackOff   5 (40s ago)   14m\n$ kubectl describe pod vllm-7d9c8b5f4-x2kqp\n    State:          Waiting\n      Reason:       CrashLoopBackOff\n    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    137\nEvents:\n  Warning  Unhealthy  2m (x3 over 2m30s)  kubelet  Liveness probe failed: Get "http://10.244.1.17:8000/health": dial tcp 10.244.1.17:8000: connect: connection refused\n  Normal   Killing    2m                  kubelet  Container vllm failed liveness probe, will be restarted\n$ kubectl logs vllm-7d9c8b5f4-x2kqp --previous\nINFO 05-02 08:11:03 [model_runner.py:1110] Starting to load model meta-llama/Llama-3.3-70B-Instruct...\nLoading safetensors checkpoint shards:  40% Completed | 12/30 [02:11<03:18, 11.02s/it]\nIs exit code 137 an OOM? The container has 64Gi memory limit, GPU is an H100 80GB, --gpu-memory-utilization 0.95 --tensor-parallel-size 4'
CASES = {
    "request-prose-en": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096, "requested_tokens": 10096},
        "I start the server with\nvllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.9\nOur client has max_tokens fixed at 4096. The prompt is about 6000 tokens, which should fit in 8k, but every call comes back with\nopenai.BadRequestError: Error code: 400\nWhy is it rejected?",
    ),
    "request-prose-ko": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096, "requested_tokens": 10096},
        "서버는 이렇게 띄웠습니다:\nvllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n클라이언트에서 max_tokens를 4096으로 고정했고, 프롬프트는 대략 6000 토큰입니다.\n그런데 요청마다 400 Bad Request 에러가 납니다. 컨텍스트 안에 들어가야 하는 거 아닌가요?",
    ),
    "request-prose-zh": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096, "requested_tokens": 10096},
        "启动命令: python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2-7B-Instruct --max-model-len 8192\n客户端 max_tokens 设为 4096，提示约 6000 个 token，按理说没超过上下文，\n但是接口一直返回 400 Bad Request，说超过了 maximum context length。",
    ),
    "request-prose-de": (
        "request_too_long",
        {"max_model_len": 16384, "prompt_tokens": 9000, "max_tokens": 8192, "requested_tokens": 17192},
        "Server: vllm serve mistralai/Mistral-7B-Instruct-v0.3 --max-model-len 16384\nIm Client ist max_tokens auf 8192 gesetzt, der Prompt hat etwa 9000 Tokens. Trotzdem kommt jedes Mal 400 Bad Request zurück, obwohl der Prompt doch in den Kontext passt?",
    ),
    "request-table": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096, "requested_tokens": 10096},
        "| setting | value |\n|---|---|\n| --max-model-len | 8192 |\n| max_tokens (client) | 4096 |\n| prompt tokens (measured) | 6000 |\n| result | HTTP 400 Bad Request |\n",
    ),
    "cap-vllmopenai-en": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'from langchain_community.llms import VLLMOpenAI\nllm = VLLMOpenAI(openai_api_base="http://localhost:8000/v1", model_name="mistralai/Mistral-7B-Instruct-v0.3", openai_api_key="EMPTY")\nprint(llm.invoke("Summarise this contract in detail: ..."))\nThe summaries are only a paragraph long and stop mid-sentence. The model does fine in the vLLM playground.',
    ),
    "cap-langchain-openai-de": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'Wir benutzen langchain_openai:\nfrom langchain_openai import OpenAI\nllm = OpenAI(base_url="http://gpu01:8000/v1", model="meta-llama/Llama-3.1-8B-Instruct", api_key="x")\nDie Antworten brechen mitten im Satz ab, die Gedankenkette hört einfach auf. Mit HF transformers passiert das nicht.',
    ),
    "cap-lm-eval-command": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        "lm_eval --model local-completions --tasks gsm8k_cot --model_args model=Qwen/Qwen2.5-7B,base_url=http://localhost:8000/v1/completions,num_concurrent=8,tokenized_requests=False\ngsm8k_cot scores 0.31, far below the 0.85 we get with --model hf. Looking at the samples, the chain-of-thought just stops.",
    ),
    "cap-lm-eval-zh": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        "用 lm_eval 测 vLLM 服务：\nlm_eval --model local-chat-completions --tasks gsm8k --apply_chat_template --model_args model=qwen,base_url=http://127.0.0.1:8000/v1/chat/completions\ngsm8k 只有 0.42，远低于 HF 后端的 0.81。",
    ),
    "cap-sdk-completions-en": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        'import openai\nopenai.api_base = "http://localhost:8000/v1"\nresp = openai.Completion.create(model="facebook/opt-125m", prompt="Write a story about a dragon")\nprint(resp.choices[0].text)\n# the story is only a few words, it is cut off every time',
    ),
    "cap-sdk-completions-es": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        'Uso el SDK de OpenAI contra vLLM:\nresp = client.completions.create(model="meta-llama/Llama-3.1-8B", prompt="Escribe un artículo sobre energía solar")\nLa respuesta se corta a la mitad, siempre son unas pocas palabras.',
    ),
    "cap-sdk-completions-ko": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        'openai.Completion.create(model="mistral-7b", prompt=long_prompt) 로 호출하면 답변이 항상 몇 단어에서 잘려요.',
    ),
    "kv-short-log-en": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 3.75, "weights_gib": 14.25},
        "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 131072 --gpu-memory-utilization 0.9\nINFO 05-12 10:01:22 [gpu_model_runner.py:1843] Model loading took 14.25 GiB and 5.1 seconds\nINFO 05-12 10:01:40 [gpu_worker.py:232] Available KV cache memory: 3.75 GiB\nERROR 05-12 10:01:41 [core.py:586] EngineCore failed to start.\nRuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ),
    "kv-short-log-zh": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 3.75, "weights_gib": 14.25},
        "用 vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 131072 启动，日志:\nModel loading took 14.25 GiB\nAvailable KV cache memory: 3.75 GiB\n然后 EngineCore failed to start，前面的报错被截掉了。",
    ),
    "kv-short-compose": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 3.75, "weights_gib": 14.25},
        'vllm-1  | (EngineCore_DP0 pid=91) INFO 07-01 10:00:01 [gpu_model_runner.py:1843] Model loading took 14.25 GiB and 6.2 seconds\nvllm-1  | (EngineCore_DP0 pid=91) INFO 07-01 10:00:19 [gpu_worker.py:232] Available KV cache memory: 3.75 GiB\nvllm-1  | (EngineCore_DP0 pid=91) ERROR 07-01 10:00:20 [core.py:700] EngineCore failed to start.\nvllm-1 exited with code 1\ncommand: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "131072"]',
    ),
    "kv-short-retold-en": (
        "kv_cache_too_small_at_startup",
        {"kv_needed_gib": 12.0, "kv_available_gib": 4.5, "estimated_max_model_len": 98000, "max_model_len": 262144},
        "vLLM 0.10 on a 4090, Qwen3-30B-A3B-AWQ. It said it needs about 12 GiB of KV cache for the 262k max seq len but only ~4.5 GiB available, estimated max model length about 98000. What should I set?",
    ),
    "kv-short-retold-es": (
        "kv_cache_too_small_at_startup",
        {"kv_needed_gib": 12.0, "kv_available_gib": 4.5, "estimated_max_model_len": 98000},
        "Con vLLM 0.10 y Qwen3-30B-A3B no arranca: dice que necesita unos 12 GiB de KV cache para el max seq len de 262k pero solo hay ~4.5 GiB disponibles, longitud máxima estimada de unos 98000.",
    ),
    "no-blocks-de": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.5, "weights_gib": 13.5},
        "Ich habe gpu_memory_utilization auf 0.5 gesenkt, weil andere Jobs auf der Karte laufen.\nINFO Model loading took 13.5 GiB\nJetzt bricht der Start ab: kein Speicher für die Cache-Blöcke, man solle gpu_memory_utilization erhöhen.",
    ),
    "no-blocks-es": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.45, "weights_gib": 14.9},
        "Bajé gpu_memory_utilization a 0.45 y ahora vLLM no arranca. Model loading took 14.9 GiB.\nEl error dice que no hay memoria para los bloques de caché y que intente aumentar gpu_memory_utilization.",
    ),
    "no-blocks-zh": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.4, "weights_gib": 15.2},
        "把 gpu_memory_utilization 调到 0.4 之后启动失败。Model loading took 15.2 GiB，报错说没有可用的缓存块，让我调大 gpu_memory_utilization。",
    ),
    "no-blocks-en": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.35, "weights_gib": 14.99},
        "I lowered --gpu-memory-utilization to 0.35 because another job shares the card.\nINFO 02-01 11:00:00 [model_runner.py:1100] Model loading took 14.99 GiB and 8.1 seconds\nNow startup fails and says there is no memory left for the cache blocks.",
    ),
    "no-blocks-compose-de": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.4, "weights_gib": 13.97},
        "api-1  | Model loading took 13.97 GiB\napi-1  | RuntimeError: ... (das Original ist abgeschnitten) kein Speicher für die Cache-Blöcke, gpu_memory_utilization erhöhen\nenvironment: VLLM_ARGS=--gpu-memory-utilization 0.4",
    ),
    "held-smi-en": (
        "gpu_memory_held_by_others",
        {"other_process_gib": 1.1591796875, "gpu_memory_utilization": 0.98},
        "+-----------------------------------------------------------------------------+\n| NVIDIA-SMI 535.104   Driver Version: 535.104   CUDA Version: 12.2               |\n|   0  NVIDIA GeForce RTX 4090  Off | 00000000:01:00.0  On |                  Off |\n|  0%   45C    P8    20W / 450W |   1187MiB / 24564MiB |      3%      Default |\n| Processes:                                                                  |\n|    0   N/A  N/A      1534      G   /usr/lib/xorg/Xorg                  612MiB |\n|    0   N/A  N/A      1790      G   /usr/bin/gnome-shell                150MiB |\n|    0   N/A  N/A      3012      G   ...AAAAAAAAA= --shared-files        410MiB |\n+-----------------------------------------------------------------------------+\nI launch with --gpu-memory-utilization 0.98 and vllm refuses, saying the free memory on the device is less than the desired GPU memory utilization.",
    ),
    "held-smi-pt": (
        "gpu_memory_held_by_others",
        {"other_process_gib": 1.1591796875, "gpu_memory_utilization": 0.98},
        "nvidia-smi mostra:\n|  0%   45C    P8    20W / 450W |   1187MiB / 24564MiB |      3%      Default |\n|    0   N/A  N/A      1534      G   /usr/lib/xorg/Xorg                  612MiB |\n|    0   N/A  N/A      2211      G   /opt/google/chrome/chrome           575MiB |\nCom --gpu-memory-utilization 0.98 o vLLM não inicia: diz que a memória livre no dispositivo é menor que a utilização desejada.",
    ),
    "held-smi-zh": (
        "gpu_memory_held_by_others",
        {"other_process_gib": 1.1591796875, "gpu_memory_utilization": 0.98},
        "nvidia-smi：\n|  0%   41C    P8    18W / 350W |   1187MiB / 24576MiB |      2%      Default |\n|    0   N/A  N/A      1201      G   /usr/lib/xorg/Xorg                  640MiB |\n|    0   N/A  N/A      1855      G   /usr/bin/gnome-shell                547MiB |\n用 --gpu-memory-utilization 0.98 启动 vllm，报错说设备上的可用显存小于期望的 GPU 显存利用率。",
    ),
    "held-smi-csv": (
        "gpu_memory_held_by_others",
        {"other_process_gib": 1.1591796875, "gpu_memory_utilization": 0.98},
        "$ nvidia-smi --query-gpu=memory.used,memory.total --format=csv\nmemory.used [MiB], memory.total [MiB]\n1187 MiB, 24564 MiB\nvllm serve Qwen/Qwen2.5-3B-Instruct --gpu-memory-utilization 0.98\nIt refuses to start: free memory on the device is lower than the desired gpu memory utilization.",
    ),
    "oom-runtime-generate": (
        "cuda_oom_runtime",
        {
            "tried_to_allocate_gib": 9.28,
            "total_gib": 79.19,
            "free_gib": 5.12,
            "this_process_gib": 74.06,
            "allocated_gib": 68.2,
            "reserved_unallocated_gib": 4.91,
            "max_num_batched_tokens": 32768,
        },
        'outputs = llm.generate(prompts, SamplingParams(max_tokens=512, logprobs=20, prompt_logprobs=5))\nIt runs for ~3k docs, then:\nTraceback (most recent call last):\n  File "/app/score.py", line 88, in <module>\n    outputs = llm.generate(batch, params)\n  File "/usr/local/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1560, in execute_model\n    prompt_logprobs_dict = self._get_prompt_logprobs_dict(\n  File "/usr/local/lib/python3.10/site-packages/vllm/v1/sample/sampler.py", line 120, in compute_logprobs\n    return logits.log_softmax(dim=-1, dtype=torch.float32)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB. GPU 0 has a total capacity of 79.19 GiB of which 5.12 GiB is free. Including non-PyTorch memory, this process has 74.06 GiB memory in use. Of the allocated memory 68.20 GiB is allocated by PyTorch, and 4.91 GiB is reserved by PyTorch but unallocated.\nLLM(model="meta-llama/Llama-3.1-8B-Instruct", max_num_batched_tokens=32768)',
    ),
    "oom-runtime-sampler-frames": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 3.91, "total_gib": 39.38, "max_num_batched_tokens": 16384},
        'vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens 16384\nERROR 06-01 09:12:44 [core.py:588] Traceback (most recent call last):\nERROR 06-01 09:12:44 [core.py:588]   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 237, in step\nERROR 06-01 09:12:44 [core.py:588]     model_output = self.execute_model(scheduler_output)\nERROR 06-01 09:12:44 [core.py:588]   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1390, in execute_model\nERROR 06-01 09:12:44 [core.py:588]     sampler_output = self.sampler(logits=logits, sampling_metadata=sampling_metadata)\nERROR 06-01 09:12:44 [core.py:588]   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/sample/sampler.py", line 61, in forward\nERROR 06-01 09:12:44 [core.py:588]     raw_logprobs = self.compute_logprobs(logits)\nERROR 06-01 09:12:44 [core.py:588] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 39.38 GiB of which 2.05 GiB is free. Including non-PyTorch memory, this process has 37.32 GiB memory in use. Of the allocated memory 33.10 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.',
    ),
    "oom-runtime-zh": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 7.81, "allocated_gib": 71.5, "max_num_batched_tokens": 8192},
        '用 vllm 离线批量打分，跑了大约 3000 条之后就崩了：\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.81 GiB. GPU 0 has a total capacity of 79.25 GiB of which 3.02 GiB is free. Including non-PyTorch memory, this process has 76.22 GiB memory in use. Of the allocated memory 71.5 GiB is allocated by PyTorch, and 2.9 GiB is reserved by PyTorch but unallocated.\n参数: LLM(model="Qwen/Qwen2.5-7B-Instruct", max_num_batched_tokens=8192, gpu_memory_utilization=0.9)，SamplingParams(prompt_logprobs=1)',
    ),
    "oom-runtime-de": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 5.0, "this_process_gib": 43.34, "max_num_batched_tokens": 16384},
        "Nach etwa 2000 Dokumenten bricht llm.generate ab:\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.00 GiB. GPU 0 has a total capacity of 44.52 GiB of which 1.17 GiB is free. Including non-PyTorch memory, this process has 43.34 GiB memory in use. Of the allocated memory 40.01 GiB is allocated by PyTorch, and 2.10 GiB is reserved by PyTorch but unallocated.\nmax_num_batched_tokens=16384",
    ),
    "pressure-grafana-markdown": (
        "preemption",
        {"kv_cache_usage_percent": 99.7, "num_waiting": 87, "num_running": 41},
        "Grafana panels, idle vs. under load (200 users):\n| query | idle | load |\n|---|---|---|\n| rate(vllm:num_preemptions_total[5m]) | 0 | 3.2 |\n| vllm:kv_cache_usage_perc | 0.12 | 0.997 |\n| vllm:num_requests_waiting | 0 | 87 |\n| vllm:num_requests_running | 2 | 41 |\nLatency triples under load.",
    ),
    "pressure-grafana-zh": (
        "preemption",
        {"kv_cache_usage_percent": 99.5, "num_waiting": 63, "num_running": 38},
        "压测时 Grafana 面板（空闲 / 高峰）：\nvllm:num_preemptions_total 的 rate: 0 / 1.8\nvllm:kv_cache_usage_perc: 0.21 / 0.995\nvllm:num_requests_waiting: 0 / 63\nvllm:num_requests_running: 3 / 38\n吞吐掉了一半。",
    ),
    "pressure-grafana-csv": (
        "preemption",
        {"kv_cache_usage_percent": 99.1, "num_waiting": 112, "num_running": 29},
        '"Series","before","after"\n"rate(vllm:num_preemptions_total[1m])","0","2.4"\n"vllm:kv_cache_usage_perc","0.08","0.991"\n"vllm:num_requests_waiting","0","112"\n"vllm:num_requests_running","1","29"',
    ),
    "pressure-prose-en": (
        "preemption",
        {"kv_cache_usage_percent": 99.7, "num_waiting": 120, "num_running": 35},
        "Under load the dashboards show vllm:num_preemptions_total climbing (rate about 4/s), vllm:kv_cache_usage_perc at 0.997, 120 requests waiting and 35 running; idle it is 0, 0.05, 0 and 2.",
    ),
    "step-xinference": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 8192},
        "xinference launch --model-name bge-reranker-v2-m3 --model-type rerank --model-engine vllm --max_num_batched_tokens 2048\nThe model's max_model_len is 8192.\nTraceback ...\npydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig\n  Value error, ... [type=value_error, input_value=ArgsKwargs(...)]",
    ),
    "step-retold-pt": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 8192},
        "Desativei o chunked prefill (--no-enable-chunked-prefill) e o vLLM parou de subir: diz que max_num_batched_tokens (2048) é menor que o max_model_len (8192).",
    ),
    "step-retold-en": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 32768},
        "After adding --no-enable-chunked-prefill the server will not start anymore; the message said max_num_batched_tokens (2048) is smaller than max_model_len (32768).",
    ),
    "step-retold-zh": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096, "max_model_len": 16384},
        "关闭 chunked prefill 以后启动报错，说 max_num_batched_tokens (4096) 小于 max_model_len (16384)。",
    ),
    "request-llm-kwargs": (
        "request_too_long",
        {"max_model_len": 4096, "prompt_tokens": 3000, "max_tokens": 2048},
        "llm = LLM(model='Qwen/Qwen2.5-7B-Instruct', max_model_len=4096)\nRequests with max_tokens 2048 and a prompt of roughly 3000 tokens come back as 400 Bad Request, although 3000 < 4096.",
    ),
    "request-prose-es": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 5000, "max_tokens": 4096},
        "El servidor tiene --max-model-len 8192; pedimos max_tokens=4096 y el prompt son unos 5000 tokens; la API responde 400 Bad Request.",
    ),
    "request-prose-ja": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096},
        "--max-model-len 8192 で起動。max_tokens を 4096 に固定、プロンプトは約 6000 トークンです。毎回 400 エラーが返ってきます。",
    ),
    "request-body-and-status-line": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096},
        '--max-model-len 8192\nrequest: {"model": "llama", "messages": [...], "max_tokens": 4096}\nthe prompt is 6000 tokens (counted with the tokenizer)\nresponse: HTTP/1.1 400 Bad Request',
    ),
    "request-prose-pt": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 6000, "max_tokens": 4096},
        "Subi o vLLM com --max-model-len 8192. O cliente manda max_tokens 4096 e o prompt tem cerca de 6000 tokens. Recebo erro 400.",
    ),
    "kv-short-v0-weights-line": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 4.1, "weights_gib": 14.99},
        "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072 --gpu-memory-utilization 0.85\nINFO Loading model weights took 14.99 GB\nINFO Available KV cache memory: 4.1 GiB\nRuntimeError: Engine core initialization failed. See root cause above.",
    ),
    "no-blocks-pt": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.3, "weights_gib": 15.1},
        "Reduzi gpu_memory_utilization para 0.3 e o vLLM não inicia mais. Model loading took 15.1 GiB. Diz que não há memória disponível para os blocos de cache.",
    ),
    "no-blocks-ko": (
        "no_cache_blocks",
        {"gpu_memory_utilization": 0.4, "weights_gib": 14.3},
        "gpu_memory_utilization 을 0.4 로 낮췄더니 Model loading took 14.3 GiB 이후 캐시 블록에 쓸 메모리가 없다고 나옵니다.",
    ),
    "held-smi-de": (
        "gpu_memory_held_by_others",
        {"other_process_gib": 2.255859375, "gpu_memory_utilization": 0.95},
        "|  30%   38C    P8    21W / 350W |   2310MiB / 24576MiB |      1%      Default |\n--gpu-memory-utilization 0.95\nvLLM startet nicht: der freie Speicher auf dem Gerät ist kleiner als die gewünschte GPU-Auslastung.",
    ),
    "step-retold-de": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 8192},
        "Nach --no-enable-chunked-prefill startet vLLM nicht mehr: max_num_batched_tokens (2048) ist kleiner als max_model_len (8192).",
    ),
    "step-retold-es-switch-false": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096, "max_model_len": 32768},
        "Con --enable-chunked-prefill false el servidor no arranca: max_num_batched_tokens (4096) es menor que max_model_len (32768).",
    ),
    "pressure-prometheus-scrape": (
        "preemption",
        {"kv_cache_usage_percent": 99.8, "num_waiting": 45, "num_running": 31},
        '# under load\nvllm:num_preemptions_total{model_name="llama"} 1532\nvllm:kv_cache_usage_perc{model_name="llama"} 0.998\nvllm:num_requests_waiting{model_name="llama"} 45\nvllm:num_requests_running{model_name="llama"} 31',
    ),
    "cap-vllmopenai-ko": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        "langchain 의 VLLMOpenAI(openai_api_base='http://localhost:8000/v1', model_name='qwen') 로 요약을 만들면 요약이 한 문단에서 중간에 끊겨요.",
    ),
    "cap-opencompass-score": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512},
        "opencompass eval with OpenAISDK(path='qwen', openai_api_base='http://0.0.0.0:8000/v1') — math scores are much lower than the official ones; answers look truncated.",
    ),
    "oom-runtime-ko": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 6.0},
        "대략 3000건 처리한 뒤에 죽습니다:\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 79.1 GiB of which 2.1 GiB is free. Including non-PyTorch memory, this process has 77.0 GiB memory in use.",
    ),
    "cap-a-paragraph-long-en": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'from langchain_community.llms import VLLMOpenAI\nllm = VLLMOpenAI(openai_api_base="http://h:8000/v1", model_name="m")\nThe summaries are only a paragraph long even for 40-page reports.',
    ),
    "cap-a-paragraph-long-es": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        'llm = VLLMOpenAI(openai_api_base="http://h:8000/v1", model_name="m")\nLas respuestas tienen solo un párrafo aunque pido un informe largo.',
    ),
}
LOOK_ALIKES = {
    "a-paragraph-long-without-a-client": "The release notes are only a paragraph long, and the server logs look fine.",
    "cache-blocks-without-a-failure": "INFO Model loading took 14.2 GiB\nNo problem with the cache blocks, the server "
    "starts and serves fine; I only ask whether gpu_memory_utilization 0.5 is wasteful.",
    "probe-kill-en": 'kubectl describe pod vllm-0\nEvents:\n  Warning  Unhealthy  3m   kubelet  Liveness probe failed: Get "http://10.0.0.5:8000/health": dial tcp 10.0.0.5:8000: connect: connection refused\n  Normal   Killing    3m   kubelet  Container vllm failed liveness probe, will be restarted\nLast State: Terminated  Reason: Error  Exit Code: 137\nLogs: Loading safetensors checkpoint shards:  43% Completed | 13/30 [02:51<03:45, 13.2s/it]\nThe pod keeps restarting with exit code 137, is it out of memory? --gpu-memory-utilization 0.95 --max-model-len 32768',
    "probe-kill-describe": K8S_DESCRIBE,
    "probe-kill-zh": "Pod 一直重启，Exit Code: 137，是显存不够吗？\nEvents:\n  Warning  Unhealthy  kubelet  Liveness probe failed: HTTP probe failed with statuscode: 503\n  Normal   Killing    kubelet  Container vllm failed liveness probe, will be restarted\n日志停在 Loading safetensors checkpoint shards:  55% Completed | 11/20\n参数 --max-model-len 32768 --gpu-memory-utilization 0.92",
    "probe-kill-oom-guessed": K8S_DESCRIBE + "\nI guess CUDA out of memory?",
    "status-400-unknown-model": "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768\nmax_tokens fixed at 1024, the prompt is about 2000 tokens.\nopenai.BadRequestError: Error code: 400 - The model `qwen` does not exist.",
    "free-memory-enough": "|  0%   45C    P8    20W / 450W |   1187MiB / 24564MiB |      3%      Default |\n--gpu-memory-utilization 0.9, and vllm says free memory is less than the desired utilization",
    "step-with-chunked-prefill": "xinference launch --model-name qwen2.5-instruct --model-engine vllm --max_num_batched_tokens 2048 --enable_chunked_prefill true --max_model_len 8192\npydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig\n  Value error, ... [type=value_error]",
    "kv-enough-server-up": "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384\nINFO Model loading took 14.25 GiB and 5.1 seconds\nINFO Available KV cache memory: 3.75 GiB\nINFO:     Application startup complete.",
    "far-below-without-a-harness": "We moved from TGI to vLLM and the latency is far below what we had, great.",
}


@pytest.mark.parametrize("category, numbers, text", CASES.values(), ids=CASES)
def test_a_failure_told_without_its_message_gets_its_cause_and_numbers(category, numbers, text):
    found = diagnose_text(text).findings
    assert found and found[0].category == category, [f.category for f in found]
    for name, value in numbers.items():
        assert found[0].numbers.get(name) == pytest.approx(value, abs=0.01), name


@pytest.mark.parametrize("text", LOOK_ALIKES.values(), ids=LOOK_ALIKES)
def test_a_look_alike_gets_no_memory_or_length_cause(text):
    found = [f.category for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]
    assert found == []


def test_pytorchs_own_message_beside_a_probe_kill_is_kept():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
    assert [f.category for f in diagnose_text(K8S_DESCRIBE + "\n" + oom).findings][:1] == ["cuda_oom_startup"]


def test_minutes_of_loading_do_not_place_an_oom_while_serving():
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.6 GiB"
    )
    for told in ("After 10 minutes of loading it fails:", "nach 3 Stunden Laden bricht es ab:"):
        assert [f.stage for f in diagnose_text(told + "\n" + oom).findings] != ["runtime"], told


def test_a_cap_the_sdk_call_sets_is_no_default():
    text = 'resp = client.completions.create(model="m", prompt=p, max_tokens=512)\nthe story is cut off'
    assert all(f.numbers.get("default_max_tokens") != 16 for f in diagnose_text(text).findings)


def test_a_context_told_by_its_first_digits_is_the_power_of_two():
    assert [to_number(text) for text in ("131k", "262k", "524k", "128k", "6k", "200k")] == [
        131072,
        262144,
        524288,
        131072,
        6000,
        200000,
    ]


def test_a_number_too_large_to_measure_anything_is_no_number():
    assert [to_number(text) for text in ("1e308k", "1e308", "9e99K", "inf", "nan")] == [None] * 5
    assert diagnose_text("--max-model-len 1e308k").findings == []
    digits = "9" * 400  # past float's range: vLLM's own wordings read it as no number, not as infinity
    for text in (
        f"Tried to allocate {digits} GiB. GPU 0 has a total capacity of {digits} GiB of which {digits} GiB is free.",
        f"Model loading took {digits} GiB",
        f"Maximum concurrency for {digits} tokens per request: {digits}x",
        f"GPU KV cache size: {digits * 12} tokens",
    ):
        diagnose_text(f"{text}\nCUDA out of memory\n400 Bad Request")


def test_an_http_status_is_no_quantity():
    for text in ("every call: 400 Bad Request", "Error code: 400 - prompt tokens", "HTTP 413 for 6000 tokens"):
        assert [f.value for f in diagnose_text("max_tokens 4096\n" + text).context.facts if f.value in (400, 413)] == []
