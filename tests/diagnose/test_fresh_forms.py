"""Reports in forms neither report file has, written to test the mechanisms rather than a wording: other languages,
vLLM's messages paraphrased, units in odd places, `vllm bench serve` blocks, Prometheus query output, clients' and
harnesses' caps, and look-alikes full of memory words (a container's OOM kill, a full disk, stop strings, the EOS
token, rate limits, Ray's and the host's RAM) that must get no memory or length cause."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES

CAUSES = {
    "ja-kv-short": (
        "kv_cache_too_small_at_startup",
        "vLLM 0.11 で Qwen3-32B を起動すると失敗します。\n\nValueError: To serve at least one request with the models's max seq len (40960), (10.00 GiB KV cache is needed, which is larger than the available KV cache memory (6.21 GiB). Based on the available memory, the estimated maximum model length is 25424. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n\nGPU は L40S 1枚です。",
    ),
    "ko-held": (
        "gpu_memory_held_by_others",
        "vLLM 실행 시 에러가 납니다. 같은 GPU에서 ComfyUI가 돌아가고 있어요.\nValueError: Free memory on device (9.87/23.55 GiB) on startup is less than desired GPU memory utilization (0.9, 21.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ),
    "es-preempt-prose": (
        "preemption",
        "Cuando subimos a 80 usuarios concurrentes el TTFT pasa de 0,5 s a 20 s. En /metrics vllm:kv_cache_usage_perc está en 0.99 y vllm:num_requests_waiting en 140. ¿Es un problema de memoria?",
    ),
    "de-request": (
        "request_too_long",
        'Bekomme beim Aufruf immer einen 400er:\n{"object":"error","message":"This model\'s maximum context length is 8192 tokens. However, you requested 9310 tokens (8286 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}',
    ),
    "ru-default16": (
        "max_tokens_default_truncation",
        'Почему ответ обрезается? Использую /v1/completions через curl:\n$ curl localhost:8000/v1/completions -d \'{"model": "qwen", "prompt": "Напиши рассказ про кота"}\'\n{"id":"cmpl-1","choices":[{"index":0,"text":" Жил-был кот по имени Мурзик, который очень любил","finish_reason":"length"}],"usage":{"prompt_tokens":9,"total_tokens":25,"completion_tokens":16}}',
    ),
    "pt-oom-runtime": (
        "cuda_oom_runtime",
        "O servidor cai depois de algumas horas em produção com 50 usuários simultâneos:\n\nERROR 05-12 10:22:01 [core.py:710] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 911.06 MiB is free. Including non-PyTorch memory, this process has 78.28 GiB memory in use.\n\nvllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.95",
    ),
    "ru-preempt-stats": (
        "preemption",
        "Производительность падает, в логах:\nINFO 03-03 12:00:10 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 310.2 tokens/s, Running: 14 reqs, Waiting: 57 reqs, GPU KV cache usage: 98.9%, Prefix cache hit rate: 0.0%",
    ),
    "paraphrase-free-mem": (
        "gpu_memory_held_by_others",
        "hey all - my vllm container dies right on startup. error says free memory on device is 5.5 of 23.6 GiB which is less than the desired gpu memory utilization of 0.9 (21.24 GiB). i do have a jupyter kernel open on that card tho",
    ),
    "paraphrase-prompt-long": (
        "request_too_long",
        "Our gateway logs show vLLM rejecting some calls: the prompt was 33,012 tokens while the model's max context length is 32,768. How do we handle this?",
    ),
    "paraphrase-no-blocks": (
        "no_cache_blocks",
        "after upgrading to 0.6.3 the server dies saying there's no available memory for the cache blocks, I had gpu_memory_utilization at 0.4 since I share the H100 with another job",
    ),
    "units-odd": (
        "kv_cache_too_small_at_startup",
        "Trying to run Llama 3.1 8B at 128k context on a 24G card (RTX 4090) at 0.9 util. vLLM says the KV cache needs 16 GiB but only 3.8 GiB is available for it, so it won't start. estimated max model length is 31136.",
    ),
    "bench-block": (
        "preemption",
        "vllm bench serve --model Qwen/Qwen2.5-7B-Instruct --max-concurrency 256 --num-prompts 2000 --random-input-len 3000\n============ Serving Benchmark Result ============\nSuccessful requests:                     2000\nMaximum request concurrency:             256\nBenchmark duration (s):                  611.08\nRequest throughput (req/s):              3.27\nOutput token throughput (tok/s):         419.20\n---------------Time to First Token----------------\nMean TTFT (ms):                          41512.22\nMedian TTFT (ms):                        40011.97\n-----Time per Output Token (excl. 1st token)------\nMean TPOT (ms):                          288.51\n==================================================\nDuring the run Grafana showed KV cache usage pinned at 100% and num_preemptions_total went from 0 to 3921.",
    ),
    "prom-api-json": (
        "preemption",
        'curl -s \'http://prom:9090/api/v1/query?query=vllm:kv_cache_usage_perc\' \n{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"vllm:kv_cache_usage_perc","instance":"10.0.0.5:8000","model_name":"llama"},"value":[1733400000.123,"0.997"]}]}}\ncurl -s \'http://prom:9090/api/v1/query?query=vllm:num_requests_waiting\'\n{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"vllm:num_requests_waiting","instance":"10.0.0.5:8000"},"value":[1733400000.123,"212"]}]}}',
    ),
    "prom-exposition": (
        "preemption",
        '# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0",model_name="qwen"} 31.0\n# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0",model_name="qwen"} 96.0\n# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.9981\n# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{engine="0",model_name="qwen"} 4412.0',
    ),
    "litellm-client": (
        "max_tokens_default_truncation",
        "litellm proxy -> vllm, responses always cut off after a sentence:\nModelResponse(id='chatcmpl-1', choices=[Choices(finish_reason='length', index=0, message=Message(content='The main reason is that', role='assistant'))], usage=Usage(completion_tokens=16, prompt_tokens=30, total_tokens=46))\nmodel_list:\n  - model_name: qwen\n    litellm_params:\n      model: hosted_vllm/qwen\n      api_base: http://vllm:8000/v1\n      text_completion: true",
    ),
    "openwebui-num-predict": (
        "max_tokens_default_truncation",
        "Open WebUI + vLLM: long answers are cut off in the middle. In Admin > Settings > Models > Advanced Params I have max_tokens (num_predict) = 128. Calling vLLM directly gives the full answer.",
    ),
    "lighteval": (
        "max_tokens_default_truncation",
        'lighteval vllm "pretrained=Qwen/Qwen2.5-Math-7B,max_model_length=4096,gpu_memory_utilization=0.8,generation_parameters={max_new_tokens:256,temperature:0.0}" "lighteval|math_500|0|0"\nThe model\'s solutions are truncated before the boxed answer, accuracy is 12%.',
    ),
    "autogen-ok": (
        "max_tokens_default_truncation",
        "AutoGen agent replies get truncated. OpenAIChatCompletionClient(model='qwen', base_url='http://localhost:8000/v1', api_key='x', model_info={...}, max_tokens=200) -> the final answer is cut at 200 tokens, finish_reason length",
    ),
    "ja-cut-client": (
        "max_tokens_default_truncation",
        'LangChain から vLLM を呼ぶと、回答が途中で切れてしまいます。\nfrom langchain_community.llms import VLLMOpenAI\nllm = VLLMOpenAI(openai_api_base="http://localhost:8000/v1", model_name="elyza")\n何か設定が必要でしょうか？',
    ),
    "es-batched": (
        "batched_tokens_lt_model_len",
        "Al arrancar vLLM 0.6.1 con --max-model-len 32768 --max-num-batched-tokens 8192 --enable-chunked-prefill=False obtengo:\nValueError: max_num_batched_tokens (8192) is smaller than max_model_len (32768). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
    ),
    "de-unified": (
        "gpu_memory_held_by_others",
        "DGX Spark (GB10), vLLM startet nicht:\nValueError: Free memory on device cuda:0 (92.4/119.7 GiB) on startup is less than desired GPU memory utilization (0.9, 107.73 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ),
    "zh-prose-preempt": (
        "preemption",
        "压测时并发 128，日志显示 GPU KV cache usage 一直 100%，抢占次数 2345 次，TPOT 从 25ms 涨到 300ms。max-model-len 设置的 32768，是不是太大了？",
    ),
    "zh-kv-small-prose": (
        "kv_cache_too_small_at_startup",
        "启动 vLLM 报错，说 KV cache 需要 12.5 GiB，但可用的 KV cache 只有 4.3 GiB，估计最大长度 11200。模型是 Qwen2.5-14B，--max-model-len 32768，单卡 A10 24G。",
    ),
    "ko-cut-16": (
        "max_tokens_default_truncation",
        'vLLM completions API 응답이 잘려서 나옵니다.\n{"choices":[{"text":" 서울은 대한민국의 수도이며","finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}',
    ),
    "oom-startup-graph": (
        "cuda_oom_startup",
        "vllm serve google/gemma-3-27b-it --max-model-len 32768 --gpu-memory-utilization 0.95\n...\nCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  43%|████▎     | 29/67 [00:08<00:10,  3.52it/s]\n(EngineCore_DP0 pid=230) ERROR 09-01 10:00:00 [core.py:708] EngineCore failed to start.\n(EngineCore_DP0 pid=230) ERROR 09-01 10:00:00 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 34.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 18.06 MiB is free. Including non-PyTorch memory, this process has 79.16 GiB memory in use.",
    ),
    "k8s-helm-oom": (
        "cuda_oom_startup",
        'helm values.yaml:\n  vllm:\n    extraArgs:\n      - --max-model-len=65536\n      - --max-num-batched-tokens=65536\n      - --gpu-memory-utilization=0.95\n$ kubectl logs deploy/llm\n(EngineCore_DP0 pid=58) ERROR 10-02 08:10:12 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3120, in _dummy_run\n(EngineCore_DP0 pid=58) ERROR 10-02 08:10:12 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 44.40 GiB of which 3.11 GiB is free.',
    ),
    "ray-list-args": (
        "batched_tokens_lt_model_len",
        "(RayWorker pid=331) engine args:\n[\n  '--model', '/ckpt/qwen2.5-7b',\n  '--max-model-len', '32768',\n  '--max-num-batched-tokens', '4096',\n  '--no-enable-chunked-prefill',\n]\nValueError: max_num_batched_tokens (4096) is smaller than max_model_len (32768). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
    ),
    "npu-prefix": (
        "no_cache_blocks",
        "[rank0]: [ERROR] 2025-07-01-10:00:00 (PID:1201, Device:0, RankID:0) ERR99999 UNKNOWN application exception\n[rank0]: ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\nvllm-ascend 0.9.1, 910B 64GB, --gpu-memory-utilization 0.5",
    ),
    "jupyter-llm": (
        "kv_cache_too_small_at_startup",
        '---------------------------------------------------------------------------\nValueError                                Traceback (most recent call last)\nCell In[3], line 3\n      1 from vllm import LLM, SamplingParams\n----> 3 llm = LLM(model="mistralai/Mistral-7B-Instruct-v0.3", gpu_memory_utilization=0.5)\n\nValueError: The model\'s max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (21456). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.',
    ),
    "windows-wsl-free": (
        "gpu_memory_held_by_others",
        "PS C:\\Users\\me> wsl\nme@PC:~$ vllm serve Qwen/Qwen2.5-3B-Instruct\n...\nValueError: Free memory on device (4.12/11.99 GiB) on startup is less than desired GPU memory utilization (0.9, 10.79 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n(the Windows desktop and Chrome use the same RTX 3060)",
    ),
    "es-cut-gen-config": (
        "max_tokens_default_truncation",
        "Con vLLM 0.9 y nuestro modelo afinado, todas las respuestas se cortan en 256 tokens aunque mandamos max_tokens=2048. En el log del servidor sale:\nINFO 06-01 10:00:00 [serving_chat.py:125] Using default chat sampling params from model: {'temperature': 0.6, 'max_tokens': 256}\ny la respuesta trae finish_reason=length, completion_tokens=256.",
    ),
    "vllm-serve-yaml-config": (
        "kv_cache_too_small_at_startup",
        "config.yaml:\nmodel: meta-llama/Llama-3.1-70B-Instruct\ntensor-parallel-size: 2\nmax-model-len: 131072\ngpu-memory-utilization: 0.9\n\n$ vllm serve --config config.yaml\nValueError: To serve at least one request with the models's max seq len (131072), (20.00 GiB KV cache is needed, which is larger than the available KV cache memory (11.46 GiB). Based on the available memory, the estimated maximum model length is 75088. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ),
    "stats-v0-swapped": (
        "preemption",
        "INFO 04-10 11:11:11 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 182.5 tokens/s, Running: 12 reqs, Swapped: 20 reqs, Pending: 64 reqs, GPU KV cache usage: 99.4%, CPU KV cache usage: 61.0%.",
    ),
    "two-requests-full": (
        "preemption",
        "why is the KV cache full with only 2 requests? logs: Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 100.0% ... we send 120k-token documents and max-model-len is 131072 on a single A100 40GB",
    ),
    "completion-tokens-prose-16": (
        "max_tokens_default_truncation",
        "Using the OpenAI python client against vLLM's /v1/completions, every answer is exactly 16 tokens long and gets cut in the middle of a word. We never pass max_tokens.",
    ),
    "chat-ui-ignored": (
        "max_tokens_default_truncation",
        'In Continue (VS Code) with our vLLM endpoint, completions are truncated after a line or two. I set "maxTokens": 4096 in config.json but it looks like it\'s ignored, the server log shows max_tokens=16 in the request params.',
    ),
    "hard-wrap-oom": (
        "cuda_oom_runtime",
        'INFO:     10.0.0.2:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n(EngineCore_DP0 pid=9) ERROR 11-01 01:01:01 [core.py:710] torch.OutOfMemoryError: CU\nDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.19 G\niB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 \nGiB memory in use. Of the allocated memory 75.40 GiB is allocated by PyTorch, and 1\n.12 GiB is reserved by PyTorch but unallocated.',
    ),
    "quoted-email": (
        "request_too_long",
        "> On Tue, Ops wrote:\n> > The batch job fails with\n> > openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's maximum context length is 4096 tokens. However, you requested 4597 tokens (4085 in the messages, 512 in the completion). Please reduce the length of the messages or completion.\", 'type': 'BadRequestError', 'param': None, 'code': 400}",
    ),
    "json-log-line": (
        "no_cache_blocks",
        '{"timestamp":"2025-10-01T10:00:00Z","level":"ERROR","logger":"vllm.v1.engine.core","message":"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."}',
    ),
    "pt-cut-stated": (
        "max_tokens_default_truncation",
        "As respostas do nosso chatbot vêm cortadas no meio da frase. No Flowise o nó ChatOpenAI está com Max Tokens = 300. Chamando o vLLM direto a resposta vem completa.",
    ),
    "ru-held": (
        "gpu_memory_held_by_others",
        "vLLM не запускается: ValueError: Free memory on device (12.1/79.25 GiB) on startup is less than desired GPU memory utilization (0.9, 71.32 GiB). На этой карте ещё крутится обучение.",
    ),
    "de-preempt-table": (
        "preemption",
        "Lasttest-Ergebnisse (vLLM 0.11, H100):\n\n| Nutzer | TTFT p50 (s) | KV-Cache-Auslastung | Wartend |\n|---|---|---|---|\n| 16 | 0.3 | 41% | 0 |\n| 64 | 2.1 | 93% | 12 |\n| 128 | 19.8 | 100% | 85 |",
    ),
    "ja-preempt-prose": (
        "preemption",
        "同時接続数を 100 にすると TTFT が 0.4 秒から 25 秒に悪化します。ログでは KV キャッシュ使用率が 99.7%、待ちリクエストが 73 件でした。",
    ),
    "es-oom-load": (
        "cuda_oom_runtime",
        "El servidor se cae bajo carga (unas 60 peticiones concurrentes):\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 47.50 GiB of which 1.31 GiB is free. Including non-PyTorch memory, this process has 46.18 GiB memory in use.",
    ),
    "de-oom-load": (
        "cuda_oom_runtime",
        "Unter Last (ca. 100 gleichzeitige Anfragen) stürzt vLLM ab:\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.05 GiB is free.",
    ),
    "ja-oom-startup": (
        "cuda_oom_startup",
        '起動時にエラーになります。\nvllm serve Qwen/Qwen2.5-32B-Instruct --max-model-len 32768\n(EngineCore_DP0 pid=77) ERROR 08-08 10:00:00 [core.py:708] EngineCore failed to start.\n(EngineCore_DP0 pid=77) ERROR 08-08 10:00:00 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 263, in determine_available_memory\n(EngineCore_DP0 pid=77) ERROR 08-08 10:00:00 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.10 GiB is free.',
    ),
    "ko-request-paraphrase": (
        "request_too_long",
        "프롬프트 길이 9000 토큰이 최대 컨텍스트 길이 8192를 초과한다는 에러가 나옵니다. 어떻게 해야 하나요?",
    ),
    "es-request-paraphrase": (
        "request_too_long",
        "vLLM me devuelve un error 400: el prompt tiene 17000 tokens y la longitud máxima de contexto es 16384. ¿Se puede aumentar?",
    ),
    "ja-request-webui": (
        "request_too_long",
        "Open WebUI で長い PDF を貼るとエラーになります：\nError: 400 This model's maximum context length is 4096 tokens. However, your request has 5321 input tokens. Please reduce the length of the input messages.",
    ),
    "v0-kv-paraphrase": (
        "kv_cache_too_small_at_startup",
        "vllm 0.5 complains the model max seq len 32768 is larger than the maximum number of tokens that can be stored in the KV cache, which is 21456. Running Mistral 7B at gpu_memory_utilization 0.5.",
    ),
    "zh-no-blocks-kv-negative": (
        "no_cache_blocks",
        "启动时日志：\nINFO 09-18 10:41:58 [gpu_worker.py:276] Available KV cache memory: -1.20 GiB\nERROR 09-18 10:41:58 [core.py:708] EngineCore failed to start.\n然后就退出了，卡是 4090 24G，模型 Qwen2.5-14B-Instruct bf16。",
    ),
    "de-held-prose": (
        "gpu_memory_held_by_others",
        "vLLM startet nicht: laut Fehlermeldung sind nur 6.1 GiB von 23.6 GiB frei, aber die gpu memory utilization von 0.9 verlangt 21.24 GiB. Auf der Karte läuft noch ein Ollama-Prozess.",
    ),
    "new-available-form": (
        "gpu_memory_held_by_others",
        "ValueError: Available memory on device cuda:0 (10.2/24.0 GiB) is below required GPU memory utilization (0.9, 21.6 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ),
    "sched-paraphrase": (
        "batched_tokens_lt_model_len",
        "With DFlash spec decode and --max-num-seqs 512 --max-num-batched-tokens 4096 vllm refuses to start, saying max_num_scheduled_tokens is set to -3072, which does not allow any tokens to be scheduled.",
    ),
    "metrics-dict": (
        "preemption",
        "I scrape /metrics from a cron job and print a dict:\n{'vllm:num_requests_running': 9.0, 'vllm:num_requests_waiting': 77.0, 'vllm:kv_cache_usage_perc': 0.996, 'vllm:num_preemptions_total': 812.0}\nlatency p99 is 40 s.",
    ),
    "ru-cut-trl": (
        "max_tokens_default_truncation",
        "Обучаю GRPO через TRL с vLLM, ответы модели обрезаются, награда за формат ноль.\ntraining_args = GRPOConfig(output_dir='out', use_vllm=True, num_generations=8, learning_rate=1e-6)",
    ),
    "opencompass-default": (
        "max_tokens_default_truncation",
        "OpenCompass eval against our vLLM server: the generated answers are truncated. Config:\nmodels = [dict(type=OpenAISDK, path='qwen2.5-7b', openai_api_base='http://vllm:8000/v1', max_seq_len=32768, batch_size=16)]",
    ),
    "verl-response": (
        "max_tokens_default_truncation",
        "verl PPO: the rollout responses are always cut off and the reward is near zero.\npython3 -m verl.trainer.main_ppo data.train_files=train.parquet data.max_prompt_length=1024 actor_rollout_ref.model.path=Qwen/Qwen2.5-3B actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
    ),
    "llama-cpp-style-n-predict": (
        "max_tokens_default_truncation",
        "Migrated from llama.cpp: our client sends n_predict: 128 and the answers are now truncated after a paragraph on vLLM too.",
    ),
    "bench-pt": (
        "preemption",
        "Resultado do vllm bench serve com 200 de concorrência:\nMean TTFT (ms):                          38120.55\nMean TPOT (ms):                          355.02\nNo /metrics: vllm:kv_cache_usage_perc 0.999, vllm:num_requests_waiting 150.",
    ),
    "gb10-prose": (
        "gpu_memory_held_by_others",
        "DGX Spark: vllm refuses to start with --gpu-memory-utilization 0.9: free memory on device 78.3 of 119.7 GiB is less than the desired 107.7 GiB.",
    ),
    "npu-oom": (
        "cuda_oom_startup",
        "[rank0]: RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; 57.12 GiB already allocated; 1.03 GiB free; 58.10 GiB reserved in total by PyTorch)\nvllm-ascend, while capturing ACL graphs at startup",
    ),
    "kubectl-args-kv": (
        "kv_cache_too_small_at_startup",
        '        args:\n        - --model\n        - /models/llama-3.1-70b-awq\n        - --max-model-len\n        - "131072"\n        - --gpu-memory-utilization\n        - "0.9"\n---\n$ kubectl logs llm-0\nValueError: To serve at least one request with the models\'s max seq len (131072), (40.00 GiB KV cache is needed, which is larger than the available KV cache memory (25.51 GiB). Based on the available memory, the estimated maximum model length is 83584. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.',
    ),
}
LOOK_ALIKES = {
    "look-137": "vllm pod keeps restarting:\nLast State: Terminated\n  Reason: OOMKilled\n  Exit Code: 137\nLimits: memory: 16Gi\nThe model is Qwen2.5-7B with --max-model-len 32768 --gpu-memory-utilization 0.9 and the GPU has 80GB free. Why OOM?",
    "look-disk": "Loading safetensors checkpoint shards fails:\nOSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-72B/blobs/abc.incomplete'\nThe GPU has 80 GB memory and max_model_len is 32768, KV cache should fit.",
    "look-stop": 'Answers stop early: the response ends right after the first list item. Request: {"model":"llama","messages":[...],"max_tokens":2048,"stop":["\\n-"]}. Response finish_reason: "stop", usage completion_tokens 37. Is the context too small? max-model-len is 8192.',
    "look-eos": "Qwen2.5 fine-tune never stops generating until max_tokens: responses hit 4096 tokens with finish_reason length. The chat template in tokenizer_config.json has the wrong eos_token (<|endoftext|> instead of <|im_end|>), so the EOS is never produced.",
    "look-429": "Getting 429 Too Many Requests from our vLLM gateway when concurrency goes above 64:\nopenai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit exceeded: 64 concurrent requests max', 'type': 'rate_limit'}}\nKV cache usage on the server is only 35%.",
    "look-ray-ram": "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the node (IP: 10.0.0.3, ID: abc) where the task was running was 240.12GB / 251.58GB (0.954452), which exceeds the memory usage threshold of 0.95. Ray killed this worker because it was the most recently scheduled task.\nvLLM with tp=8, gpu_memory_utilization 0.9",
    "look-shm": "vllm tp=4 in docker crashes: Bus error (core dumped). dmesg shows nothing. `df -h /dev/shm` -> shm 64M 64M 0 100% /dev/shm. GPU memory is fine (4x 80GB, 0.9 utilization).",
    "look-tokenizer-warn": "Token indices sequence length is longer than the specified maximum sequence length for this model (1043 > 512). Running this sequence through the model will result in indexing errors\n-- this shows in our client when we count tokens with bert-base-uncased; vLLM serves Llama with max_model_len 8192 and requests succeed.",
    "look-timeout": "httpx.ReadTimeout after 60 s on long generations (max_tokens 8192). The server logs show the request finishing at 95 s with finish_reason stop. Context is 32k, KV cache usage 40%.",
    "look-json-loop": 'With guided_json the model outputs endless whitespace and ends with finish_reason "length" at max_tokens=1000 (completion_tokens 1000). Without guided decoding the same prompt returns valid JSON in 120 tokens.',
    "look-illegal": "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nHappens under load with KV cache usage at 60% and 30 running requests, --gpu-memory-utilization 0.92.",
    "look-cpu-ram": "Killed\n$ dmesg | tail\n[12345.678] Out of memory: Killed process 4321 (python3) total-vm:120000000kB, anon-rss:62000000kB\nvllm serve with --cpu-offload-gb 48 on a 64 GB RAM box, GPU 24 GB, max_model_len 8192",
    "look-lora": "ValueError: LoRA rank 128 is greater than max_lora_rank 16.\nvllm serve base --enable-lora --max-lora-rank 16 --max-model-len 8192 --gpu-memory-utilization 0.9",
    "look-413": "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx/1.25.3</center></body></html>\nOur prompts are around 30k tokens; vLLM's max_model_len is 65536 so the context should be fine.",
    "look-driver": "RuntimeError: The NVIDIA driver on your system is too old (found version 11080). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\nvllm 0.11, --gpu-memory-utilization 0.9, max_model_len 32768, 80GB",
    "look-port": "OSError: [Errno 98] Address already in use\nvllm serve Qwen/Qwen2.5-7B --port 8000 --max-model-len 32768 --gpu-memory-utilization 0.9 (GPU shows 0 MiB used)",
    "look-tp-heads": "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).\nvllm serve Qwen2.5-7B -tp 8 --max-model-len 32768",
    "look-bf16-t4": "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.\nT4 16 GB, max-model-len 4096",
    "look-stop-zh": '回答总是很短就结束了，finish_reason 是 stop，不是 length。max_tokens 设置的 4096，上下文 32768。请求里有 stop: ["\\n\\n"]。',
    "look-finish-stop-short": 'My answers are short (about 40 tokens) even with max_tokens=2048. Response: {"choices":[{"finish_reason":"stop"}],"usage":{"completion_tokens":41,"prompt_tokens":800}}. KV cache usage is 20%.',
    "look-swap-space": "WARNING 05-01 10:00:00 config.py:1000] Possibly too large swap space. 16.00 GiB out of the 31.26 GiB total CPU memory is allocated for the swap space.\nThe server then runs fine, just asking if this warning matters.",
    "look-kv-full-ok": "INFO 10-10 10:10:10 [loggers.py:123] Engine 000: Avg prompt throughput: 120.0 tokens/s, Avg generation throughput: 900.0 tokens/s, Running: 30 reqs, Waiting: 0 reqs, GPU KV cache usage: 45.2%, Prefix cache hit rate: 60.0%\nEverything is fast, I just want to know what the prefix cache hit rate means.",
    "look-rate-429-zh": "并发 200 时网关返回 429 Too Many Requests，vLLM 本身的 KV 缓存使用率只有 30%，没有排队请求。",
    "look-int-parse": "openai.UnprocessableEntityError: Error code: 422 - {'detail': [{'type': 'int_parsing', 'loc': ['body', 'max_tokens'], 'msg': 'Input should be a valid integer, unable to parse string as an integer', 'input': '4k'}]}\nI wanted a 4k output, the context is 32k.",
    "look-no-kernel": "RuntimeError: CUDA error: no kernel image is available for execution on the device\nvllm serve on a P100 16GB, --gpu-memory-utilization 0.9 --max-model-len 4096",
    "look-docker-pull-space": "docker pull vllm/vllm-openai:v0.11.0\nfailed to register layer: write /usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cuda.so: no space left on device\nThe host has 2x A100 80GB.",
    "look-prefix-cache": "Prefix cache hit rate dropped from 80% to 5% after we changed the system prompt; KV cache usage stays around 60%, running 24 reqs, waiting 0. Is that expected?",
    "look-cpu-rss-leak": "The API server process RSS grows from 4 GB to 30 GB over a day (host RAM, not GPU). GPU memory is stable at 72/80 GB with --gpu-memory-utilization 0.9; KV cache usage 40%.",
    "look-liveness": 'Pod restarts during model load: Liveness probe failed: Get "http://10.0.0.9:8000/health": dial tcp 10.0.0.9:8000: connect: connection refused\nLast State: Terminated, Reason: Error, Exit Code: 137 (killed by kubelet after the probe). Loading a 70B takes 9 minutes; gpu-memory-utilization 0.92, max-model-len 32768.',
    "look-hf-gated": "OSError: You are trying to access a gated repo. Make sure to have access to it at https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct. 401 Client Error.\nvllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.9",
    "look-stop-es": 'Las respuestas terminan demasiado pronto, después de la primera línea. Enviamos "stop": ["\\n"] en la petición y max_tokens 1024. finish_reason es stop.',
    "look-eos-ja": "出力が途中で止まるのではなく、逆に終わりません。chat template の eos_token が間違っていて、max_tokens 4096 まで生成し続けます。",
    "look-context-warn": "WARNING 05-05 10:00:00 [config.py:1500] Possibly too large swap space. 8.00 GiB out of the 15.5 GiB total CPU memory is allocated for the swap space.\nINFO 05-05 10:00:05 [loggers.py:116] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 50.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.1%, Prefix cache hit rate: 0.0%",
}


def causes(text: str) -> list:
    return [f for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


@pytest.mark.parametrize("category, text", CAUSES.values(), ids=CAUSES)
def test_a_fresh_form_gets_its_cause(category, text):
    found = causes(text)
    assert found, "no memory or length cause"
    assert category in [found[0].category] + [alternative.category for alternative in found[0].alternatives]


@pytest.mark.parametrize("text", LOOK_ALIKES.values(), ids=LOOK_ALIKES)
def test_a_look_alike_full_of_memory_words_gets_no_memory_cause(text):
    assert [f.category for f in causes(text)] == []
