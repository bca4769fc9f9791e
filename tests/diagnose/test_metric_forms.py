"""Reports whose failure shows in metrics, launch files and prose rather than in vLLM's words, each kind written in
at least three forms (English, French, Japanese, Chinese, Russian, Portuguese, Spanish or German prose, DCGM and
vLLM Prometheus samples, nvidia-smi's process query, a Helm values file, a KServe manifest, a compose file, an
access log, lm-eval's model_args): memory held elsewhere beside the start-up check quoted in a phrase; a start-up
cut after its KV line where the model's own context applies; V1's start-up refusal retold in Chinese in other
orders; an out-of-memory error told in prose while serving; a 400 with no error text once the conversation grows;
a step budget below the context in a launch that no longer starts; answers cut at vLLM's default of 16 shown only
by its metrics. Beside them, the look-alikes each mechanism must leave alone."""

import pytest
from diagnose_form_checks import check_cause_and_numbers, check_no_memory_or_length_cause, written_in_three_forms

DCGM = (
    'DCGM_FI_DEV_FB_USED{gpu="3",UUID="GPU-5b1e",device="nvidia3",modelName="NVIDIA H100 80GB HBM3",'
    'Hostname="node-7"} 61716\n'
    'DCGM_FI_DEV_FB_FREE{gpu="3",UUID="GPU-5b1e",device="nvidia3",modelName="NVIDIA H100 80GB HBM3",'
    'Hostname="node-7"} 19363\n'
)
COMPUTE_APPS = "$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\npid, process_name, used_memory [MiB]\n48213, VLLM::EngineCore, 71680 MiB\n"
KV_LINE = "(EngineCore_DP0 pid=221) INFO 09-02 11:04:17 [gpu_worker.py:276] Available KV cache memory: {kv} GiB\n"
FAILED = (
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
)
SLOT_METRICS = (
    'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {n}\n'
    'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} 0.0\n'
    'vllm:request_generation_tokens_sum{{engine="0",model_name="m"}} {gen}\n'
    'vllm:request_generation_tokens_count{{engine="0",model_name="m"}} {n}\n'
    'vllm:request_params_max_tokens_bucket{{engine="0",le="20.0",model_name="m"}} {n}\n'
)

CASES = {
    "held-fr-dcgm": (
        "gpu_memory_held_by_others",
        {"gpu_memory_utilization": 0.9, "free_gib": 18.91, "total_gib": 79.18, "other_process_gib": 60.2695},
        "Sur le nœud 7, vllm serve Qwen/Qwen2.5-32B-Instruct-AWQ --gpu-memory-utilization 0.9 s'arrête avec une "
        "ValueError sur la « free memory on device » au démarrage. L'exporteur DCGM montre pour ce GPU :\n" + DCGM,
    ),
    "held-ja-compute-apps": (
        "gpu_memory_held_by_others",
        {"other_process_mib": 71680, "gpu_memory_utilization": 0.9},
        "ノートブックで LLM(model=...) を作り直すと、起動時に free memory on device のエラーになります。"
        "gpu_memory_utilization=0.9 です。\n" + COMPUTE_APPS + "前のセルの LLM がまだ残っているのでしょうか?",
    ),
    "held-en-retold": (
        "gpu_memory_held_by_others",
        {
            "free_gib": 18.91,
            "total_gib": 79.18,
            "gpu_memory_utilization": 0.9,
            "requested_gib": 71.26,
            "other_process_gib": 60.2695,
        },
        "The pod dies at start-up, roughly 'free memory 18.91/79.18 GiB vs desired 0.9 (71.26 GiB)'. DCGM says:\n"
        + DCGM,
    ),
    "held-zh-compute-apps": (
        "gpu_memory_held_by_others",
        {"other_process_mib": 71680},
        "在 Jupyter 里第二次运行 LLM(model='Qwen/Qwen2.5-7B-Instruct') 时，启动报 free memory on device 的 ValueError。\n"
        + COMPUTE_APPS,
    ),
    "held-exporter-bytes-de": (
        "gpu_memory_held_by_others",
        {"gpu_memory_utilization": 0.9, "other_process_gib": 60.2724},
        "vllm serve m --gpu-memory-utilization 0.9 bricht beim Start mit einem Fehler zur free memory on device ab. "
        "Unser Exporter:\n"
        'nvidia_smi_memory_used_bytes{uuid="GPU-1"} 6.4717e+10\n'
        'nvidia_smi_memory_free_bytes{uuid="GPU-1"} 2.0303e+10\n'
        'nvidia_smi_memory_total_bytes{uuid="GPU-1"} 8.5020e+10\n',
    ),
    "startup-default-helm": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_available_gib": 2.31, "kv_needed_gib": 4.0},
        "values.yaml:\nservingEngineSpec:\n  modelSpec:\n  - name: mistral\n    repository: vllm/vllm-openai\n"
        '    tag: v0.10.1\n    modelURL: "mistralai/Mistral-7B-Instruct-v0.3"\n    replicaCount: 1\n'
        "    requestGPU: 1\n    vllmConfig:\n      gpuMemoryUtilization: 0.85\n      dtype: bfloat16\n\n"
        "The pod goes to CrashLoopBackOff. Last lines:\n" + KV_LINE.format(kv="2.31") + FAILED,
    ),
    "startup-default-kserve": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 9.6, "kv_needed_gib": 16.0},
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nspec:\n  predictor:\n    containers:\n"
        "      - name: kserve-container\n        image: vllm/vllm-openai:v0.9.2\n        args:\n"
        '          - "--model"\n          - "meta-llama/Llama-3.1-8B-Instruct"\n'
        '          - "--gpu-memory-utilization"\n          - "0.9"\n'
        "Logs before the restart:\n" + KV_LINE.format(kv="9.60") + FAILED,
    ),
    "startup-default-compose-es": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_available_gib": 1.5, "kv_needed_gib": 4.0},
        "services:\n  vllm:\n    image: vllm/vllm-openai:latest\n"
        "    command: --model mistralai/Mistral-7B-Instruct-v0.3 --gpu-memory-utilization 0.6\n"
        "El contenedor se reinicia sin parar; lo último que imprime:\n"
        + KV_LINE.format(kv="1.50")
        + "(EngineCore_DP0 pid=221) ERROR 09-02 11:04:18 [core.py:700] EngineCore failed to start.\n",
    ),
    "startup-default-helm-camel": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_available_gib": 3.0, "kv_needed_gib": 4.0},
        "helm values:\n  modelURL: mistralai/Mistral-7B-Instruct-v0.3\n  vllmConfig:\n"
        "    gpuMemoryUtilization: 0.5\n    enablePrefixCaching: true\n"
        "起動に失敗して再起動を繰り返します。\n" + KV_LINE.format(kv="3.00") + FAILED,
    ),
    "startup-default-k8s-command": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_available_gib": 2.31},
        'containers:\n  - name: vllm\n    command: ["vllm", "serve", "mistralai/Mistral-7B-Instruct-v0.3", '
        '"--gpu-memory-utilization", "0.5"]\n' + KV_LINE.format(kv="2.31") + FAILED,
    ),
    "startup-default-kserve-hf": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_available_gib": 2.31},
        "spec:\n  predictor:\n    model:\n      modelFormat:\n        name: huggingface\n      args:\n"
        "        - --model_name=mistral\n        - --model_id=mistralai/Mistral-7B-Instruct-v0.3\n"
        + KV_LINE.format(kv="2.31")
        + FAILED,
    ),
    "startup-default-docker-ru": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_available_gib": 9.6, "kv_needed_gib": 16.0},
        "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.10.1 meta-llama/Llama-3.1-8B-Instruct\n"
        "Контейнер падает при запуске, последние строки:\n" + KV_LINE.format(kv="9.60") + FAILED,
    ),
    "retold-zh-order-5gib": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 5.0, "kv_available_gib": 1.98, "estimated_max_model_len": 12976},
        "启动 vllm 的时候报错，大概是说要服务一个 32768 长度的请求需要 5.00 GiB 的 KV cache，但是可用的只有 1.98 GiB，"
        "然后说根据可用显存估计最大模型长度是 12976。",
    ),
    "retold-zh-order-seq": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 8.0, "kv_available_gib": 3.12, "estimated_max_model_len": 12768},
        "报错大意是 max seq len 32768 需要 8.0 GiB 的 KV cache，但可用的只有 3.12 GiB，估计最大长度是 12768。",
    ),
    # the utilization told a sentence later, in a paste short enough to be read as one paragraph
    "retold-zh-order-util-later": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 6.0, "kv_available_gib": 2.2},
        "报错说 max seq len 32768 需要 6.0 GiB 的 KV cache，但可用的只有 2.2 GiB。\n"
        "卡是 24G 的，为什么不够？gpu-memory-utilization 已经是 0.9 了。",
    ),
    "retold-zh-order-util-later-ja": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_needed_gib": 8.0, "kv_available_gib": 3.0},
        "65536 長さのリクエストには 8 GiB の KV キャッシュが必要だが、3.0 GiB しかないと言われました。\n"
        "gpu-memory-utilization は 0.92 にしています。",
    ),
    "retold-zh-order-util-later-en": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 4.0, "kv_available_gib": 1.5},
        "vllm serve fails at start-up: a max seq len 32768 request needs 4 GiB of KV cache and only 1.5 GiB is "
        "available. "
        "My gpu-memory-utilization is 0.95 already.",
    ),
    # the launch's flags, utilization among them, a sentence before the refusal in one paragraph
    "retold-zh-order-util-earlier": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 5.0, "kv_available_gib": 1.98},
        "两张卡 --tensor-parallel-size 2 --max-model-len 32768 --gpu-memory-utilization 0.95，启动到最后就退出了。\n"
        "报错大意是：要服务一个 32768 长度的请求需要 5.00 GiB 的 KV cache，但是可用的只有 1.98 GiB。",
    ),
    "retold-zh-order-util-earlier-en": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_needed_gib": 8.0, "kv_available_gib": 2.5},
        "Launched with --max-model-len 65536 --gpu-memory-utilization 0.93 on one L40S. It fails at start-up: "
        "a max seq len 65536 request needs 8 GiB of KV cache but only 2.5 GiB is available.",
    ),
    "retold-zh-order-avail-first": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_needed_gib": 8.0, "kv_available_gib": 2.5},
        "启动失败：可用的 KV cache 只有 2.5 GiB，而 65536 长度的请求需要 8 GiB 的 KV cache。",
    ),
    "retold-zh-order-ja": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 4.0, "kv_available_gib": 1.5},
        "起動時のエラーを要約すると、32768 長さのリクエストには 4 GiB の KV キャッシュが必要だが、使えるのは 1.5 GiB しかない、"
        "というものでした。",
    ),
    "retold-zh-order-ru": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 8.0, "kv_available_gib": 3.12, "estimated_max_model_len": 12768},
        "Ошибка при запуске: для запроса длиной 32768 нужно 8 GiB KV-кэша, а доступно только 3.12 GiB, оценка "
        "максимальной длины 12768.",
    ),
    "retold-zh-order-left": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 5.0, "kv_available_gib": 1.98, "estimated_max_model_len": 12976},
        "启动时报错：KV cache 只剩 1.98 GiB 可用，但 32768 长度的请求要 5 GiB，估计最大模型长度是 12976。",
    ),
    "retold-zh-order-ko": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 8.0, "kv_available_gib": 3.12},
        "시작할 때 에러: 32768 길이의 요청에는 8 GiB 의 KV 캐시가 필요하지만 사용 가능한 것은 3.12 GiB 뿐이라고 합니다.",
    ),
    "oom-prose-en": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 18.56, "free_gib": 6.02, "prompt_tokens": 32768},
        "On short texts all is fine, on 32768-token documents the engine falls over: torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 18.56 GiB, with 6.02 GiB free. We ask for prompt_logprobs.",
    ),
    "oom-prose-ru": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 18.56, "free_gib": 6.02, "prompt_tokens": 32768},
        "На коротких текстах всё ок, на документах по 32768 токенов движок падает: torch.OutOfMemoryError: CUDA out "
        "of memory. Tried to allocate 18.56 GiB ... 6.02 GiB is free.",
    ),
    "oom-prose-pt": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 1.52},
        "Funciona bem com texto, mas duas vezes por dia o serviço morre e reinicia, sempre quando alguém manda "
        "várias fotos grandes; o log mostra torch.OutOfMemoryError dentro do vision encoder, 'Tried to allocate "
        "1.52 GiB', depois EngineDeadError.\n"
        "Sep 02 14:11:07 gpu1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE\n"
        "Sep 02 14:11:17 gpu1 systemd[1]: vllm.service: Scheduled restart job, restart counter is at 3.\n",
    ),
    "oom-prose-retold-oom": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 18.56, "free_gib": 6.02, "prompt_tokens": 32768},
        "We get CUDA OOM (tried to allocate 18.56 GiB, 6.02 GiB free) only when sending 32k-token documents; short "
        "prompts are fine.",
    ),
    "oom-prose-de": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 18.56, "prompt_tokens": 32768},
        "Mit kurzen Texten läuft alles, bei Dokumenten mit 32768 Tokens stürzt die Engine ab: torch.OutOfMemoryError: "
        "CUDA out of memory. Tried to allocate 18.56 GiB",
    ),
    "oom-prose-es": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 18.56, "prompt_tokens": 32768},
        "Con textos cortos todo va bien, con documentos de 32768 tokens el motor se cae: torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 18.56 GiB",
    ),
    "oom-prose-fr": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 18.56, "prompt_tokens": 32768},
        "Avec des textes courts tout va bien, avec des documents de 32768 tokens le moteur plante : "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.56 GiB",
    ),
    "oom-prose-logprobs": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 9.28},
        "We score documents with prompt_logprobs=1 through vllm serve; for the longest ones the engine dies with "
        "torch.OutOfMemoryError (Tried to allocate 9.28 GiB).",
    ),
    "oom-prose-restart-en": (
        "cuda_oom_runtime",
        {"tried_to_allocate_gib": 2.0},
        "The service restarts under load a few times a day. journalctl shows torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 2.00 GiB and then vllm.v1.engine.exceptions.EngineDeadError.\n"
        "systemd[1]: vllm.service: Scheduled restart job, restart counter is at 7.",
    ),
    "silent400-en": (
        "request_too_long",
        {"max_model_len": 16384},
        "vllm serve Qwen/Qwen2.5-32B-Instruct-AWQ --max-model-len 16384 (the full context would not start).\n"
        "Open WebUI works for a while, but once the conversation grows or I attach a long PDF it only shows "
        '"Oops! There was an error in the previous response." The vLLM log has just:\n'
        'INFO:     172.18.0.5:50122 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
        "INFO 09-02 10:01:12 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%",
    ),
    "silent400-de": (
        "request_too_long",
        {"max_model_len": 8192},
        "Gestartet mit --max-model-len 8192, weil der volle Kontext nicht startet. Bei kurzen Chats geht alles, "
        "aber sobald ich ein langes Dokument anhänge, kommt nur ein allgemeiner Fehler im Chat. Im Log:\n"
        '"POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
    ),
    "silent400-access-log": (
        "request_too_long",
        {"max_model_len": 16384},
        "services:\n  vllm:\n    command: --model Qwen/Qwen2.5-14B-Instruct --max-model-len 16384\n"
        "Our RAG app shows a generic error, but only with long PDFs. docker logs vllm:\n"
        'vllm-1  | INFO:     10.0.0.7:41234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        'vllm-1  | INFO:     10.0.0.7:41250 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n',
    ),
    "silent400-zh": (
        "request_too_long",
        {"max_model_len": 16384},
        "启动参数 --max-model-len 16384（完整上下文起不来）。对话一变长或者上传长文档，前端就只显示一个通用错误，"
        'vLLM 日志里只有 "POST /v1/chat/completions HTTP/1.1" 400 Bad Request，prompt throughput 是 0。',
    ),
    "budget-lmeval-es": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096, "max_model_len": 8192},
        "lm_eval --model vllm --model_args pretrained=meta-llama/Llama-3.1-8B-Instruct,max_model_len=8192,"
        "max_num_batched_tokens=4096,enable_chunked_prefill=False,gpu_memory_utilization=0.8 --tasks gsm8k\n"
        "Desde que añadí max_num_batched_tokens ya no arranca; dice algo del SchedulerConfig y que 4096 es menor "
        "que 8192.",
    ),
    "budget-llm-kwargs-en": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 16384},
        "llm = LLM(model='Qwen/Qwen2.5-7B-Instruct', max_model_len=16384, max_num_batched_tokens=2048,\n"
        "          enable_chunked_prefill=False)\nSince upgrading, this no longer starts.",
    ),
    "budget-lmeval-ja": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096, "max_model_len": 32768},
        "lm_eval --model vllm --model_args pretrained=Qwen/Qwen2.5-7B-Instruct,max_model_len=32768,"
        "max_num_batched_tokens=4096,enable_chunked_prefill=False\nこの設定だと起動しない。",
    ),
    "budget-yaml-de": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 8192, "max_model_len": 32768},
        "engine_args:\n  model: Qwen/Qwen2.5-14B-Instruct\n  max_model_len: 32768\n  max_num_batched_tokens: 8192\n"
        "  enable_chunked_prefill: false\nMit dieser Konfiguration startet vLLM nicht mehr.",
    ),
    "slot16-prom": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        "LlamaIndex OpenAILike(model='m', api_base='http://vllm:8000/v1', is_chat_model=False) against vLLM. "
        "Answers are a few words. /metrics:\n" + SLOT_METRICS.format(n="1843.0", gen="29488.0"),
    ),
    "slot16-table": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        "| metric | value |\n|---|---|\n"
        '| vllm:request_success_total{finished_reason="length"} | 920 |\n'
        '| vllm:request_success_total{finished_reason="stop"} | 0 |\n'
        "| vllm:request_generation_tokens_sum | 14720 |\n| vllm:request_generation_tokens_count | 920 |\n",
    ),
    "slot16-some-stopped": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        "OpenAILike(model='qwen', api_base='http://gpu:8000/v1') for the summaries; they are all a few words long.\n"
        'vllm:request_success_total{finished_reason="length",model_name="qwen"} 1750.0\n'
        'vllm:request_success_total{finished_reason="stop",model_name="qwen"} 93.0\n'
        'vllm:request_generation_tokens_sum{model_name="qwen"} 29011.0\n'
        'vllm:request_generation_tokens_count{model_name="qwen"} 1843.0\n',
    ),
    "slot16-zh": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 16},
        "我们用 LlamaIndex 的 OpenAILike 调 vLLM 的 /v1/completions，没有传 max_tokens，回答都很短。/metrics 里：\n"
        + SLOT_METRICS.format(n="402", gen="6432"),
    ),
}

LOOK_ALIKES = {
    # a first short message refused: the context is no limit here
    "silent400-first-message": "vllm serve m --max-model-len 16384\nEven the very first short message gets "
    '"Oops! There was an error in the previous response." Log: "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
    # a 400 whose body names the schema
    "silent400-schema": "vllm serve m --max-model-len 16384\nOnce the conversation grows the UI fails; the log has "
    "\"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request and the body says: Invalid tool schema: 'parameters' must "
    "be an object",
    # a request's own field refused (pydantic), after a few turns
    "silent400-validation": "--max-model-len 16384. After a few turns the chat fails: openai.BadRequestError: Error code:"
    " 400 - {'error': {'message': \"1 validation error for ChatCompletionRequest\\nmessages.0.user.name\\n  Extra "
    "inputs are not permitted [type=extra_forbidden, input_value='bob', input_type=str]\"}}",
    # a model not found
    "silent400-model": "--max-model-len 8192. When a long document is attached the UI errors; the body says "
    "The model `gpt-4o` does not exist. 404 Not Found",
    # a proxy in front refused the long document's body before vLLM saw it
    "silent400-proxy-413": "vllm serve m --max-model-len 131072 behind ingress-nginx. Long documents fail, short ones "
    "work: openai.APIStatusError: Error code: 413 - <html><title>413 Request Entity Too Large</title> nginx/1.25.3",
    "silent400-proxy-429": "--max-model-len 32768 behind our API gateway. Once the conversation grows past a few "
    "turns, requests fail with HTTP 429 Too Many Requests from Kong; vLLM's log shows nothing.",
    "silent400-proxy-502": "vllm serve m --max-model-len 16384. 长文档上传后对话就报错，短的没问题：HTTP 502 Bad Gateway，"
    "vLLM 日志里没有这个请求。",
    # DCGM samples beside a server that runs fine
    "dcgm-running": "The server runs fine, just checking memory:\n" + DCGM,
    # chunked prefill on
    "budget-chunked-on": "lm_eval --model vllm --model_args pretrained=m,max_model_len=8192,max_num_batched_tokens="
    "4096,enable_chunked_prefill=True\nScores are lower than reported.",
    # a launch that does not start, its step budget as large as the context
    "budget-not-below": "LLM(model='m', max_model_len=8192, max_num_batched_tokens=8192, enable_chunked_prefill=False)"
    " no longer starts: CUDA error: an illegal memory access was encountered",
    # the quoted check beside DCGM samples that leave enough free for the utilization asked
    "held-dcgm-enough": "vllm serve m --gpu-memory-utilization 0.2 fails with an error about free memory on device.\n"
    + DCGM,
    # a KV line that holds the model's own context, the start-up failing for another reason
    "startup-default-fits": 'modelURL: "mistralai/Mistral-7B-Instruct-v0.3"\n' + KV_LINE.format(kv="9.60") + FAILED,
    # most requests stopped by themselves
    "slot16-stopped": SLOT_METRICS.replace(
        'finished_reason="stop",model_name="m"}} 0.0', 'finished_reason="stop",model_name="m"}} 1800.0'
    ).format(n="3", gen="48"),
    # a KV line of a start-up that came up, for a model kvtool sizes
    "startup-default-up": 'modelURL: "mistralai/Mistral-7B-Instruct-v0.3"\n'
    + KV_LINE.format(kv="2.31")
    + "INFO:     Application startup complete.",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_report_told_in_this_form_gets_its_cause_and_numbers(name):
    check_cause_and_numbers(name, CASES[name])


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_a_look_alike_gets_no_memory_or_length_cause(name):
    check_no_memory_or_length_cause(name, LOOK_ALIKES[name])


KINDS = ("held", "startup-default", "retold-zh-order", "oom-prose", "silent400", "budget", "slot16")


def test_every_kind_is_written_in_three_forms():
    assert written_in_three_forms(CASES, KINDS)
