"""Reports that retell what vLLM said, or show it through a harness or a launcher, each kind written in at least
three forms (English prose, Spanish, Chinese, Japanese, Korean, Russian or German prose, a Markdown table,
Prometheus text, an evaluation harness's own config, a multi-line Python call, a YAML file): a refused request's
two numbers retold, approximate ones too; a harness's own cap beside requests that finished by length; V1's
start-up refusal retold in other languages; lengths tried beside the KV cache size in a table with thousands
separators and bold marks; an out-of-memory error in a model's forward after short inputs worked; SchedulerConfig's
complaint about a Ray Serve LLM config retold. Beside them, the look-alikes: a server that started, refusing a
request for a limit that is no length or memory."""

import pytest
from diagnose_form_checks import check_cause_and_numbers, check_no_memory_or_length_cause, written_in_three_forms

from kvtool.engine.diagnosis import diagnose_text

ENGINE_CORE = "(EngineCore_DP0 pid=812) ERROR 10-14 09:12:44 [core.py:710] "  # V1's prefix on every line
FATAL = ENGINE_CORE + "EngineCore encountered a fatal error.\n"
# a model's forward and nothing else: no frame of loading, profiling or the busy loop says when it ran
V1_FORWARD_OOM = "\n".join(
    ENGINE_CORE + line
    for line in (
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/{model}.py", line 1187, in forward',
        "    hidden_states = self.visual(pixel_values)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 2.31 GiB is free.",
    )
)

CASES = {
    "retold-request-en": (
        "request_too_long",
        {"max_model_len": 16384, "prompt_tokens": 19200},
        "vllm serve Qwen/Qwen2.5-14B-Instruct --max-model-len 16384\nWhen I paste the whole contract the API returns "
        "400, something like the model's maximum context is 16384 tokens and my message has ~19200 tokens. Is there "
        "a way to raise it?",
    ),
    "retold-request-es": (
        "request_too_long",
        {"max_model_len": 16384, "prompt_tokens": 19200},
        "Cuando mando el documento completo recibo un error 400: dice que el contexto máximo del modelo es 16384 "
        "tokens y mi mensaje tiene ~19200 tokens. ¿Cómo lo soluciono?",
    ),
    "retold-request-zh": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 9000},
        "用 vLLM 部署的 Qwen2-7B，调接口返回 400，提示说模型最大上下文是 8192，我的输入有 9000 多 token，怎么办？",
    ),
    "retold-request-ja": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 10000},
        "長い議事録を要約させると 400 が返ってきます。エラーはモデルの最大コンテキスト長は 8192 トークンですが、"
        "入力が約1万トークンあります、という内容でした。",
    ),
    "retold-request-table": (
        "request_too_long",
        {"max_model_len": 32768, "prompt_tokens": 41000},
        "| what | value |\n|---|---|\n| max context of the model | 32,768 tokens |\n| my prompt | ~41,000 tokens |"
        "\n| response | HTTP 400 Bad Request |",
    ),
    "retold-request-de": (
        "request_too_long",
        {"max_model_len": 4096, "prompt_tokens": 5100},
        "Die API antwortet mit Fehler 400: die maximale Kontextlänge des Modells ist 4096 Tokens, meine Eingabe hat "
        "etwa 5100 Tokens.",
    ),
    "retold-request-fr": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 9500},
        "L'API renvoie une erreur 400 : le contexte maximal du modèle est de 8192 tokens et mon message fait environ "
        "9500 tokens.",
    ),
    "retold-request-ko": (
        "request_too_long",
        {"max_model_len": 8192, "prompt_tokens": 9500},
        "API가 400을 반환합니다. 모델의 최대 컨텍스트는 8192 토큰인데 제 입력이 약 9500 토큰이라고 합니다.",
    ),
    "retold-request-zh-myriad": (
        "request_too_long",
        {"max_model_len": 32768, "prompt_tokens": 40000},
        "调用报错 400，大概意思是模型上下文长度 32768，输入 token 数约 4万。",
    ),
    "harness-lm-eval-metrics": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 256},
        "lm_eval --model local-completions --model_args model=Qwen/Qwen3-8B,base_url=http://localhost:8000/v1/"
        "completions --tasks gsm8k\nlocal-completions (model=Qwen/Qwen3-8B,base_url=http://localhost:8000/v1/"
        "completions), gen_kwargs: ({'until': ['Question:'], 'do_sample': False, 'max_gen_toks': 256}), limit: None\n"
        "The score is 0.12. curl localhost:8000/metrics | grep request_success:\n"
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-8B"} 1319.0\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 0.0',
    ),
    "harness-opencompass-zh": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512},
        "用 OpenCompass 评测部署在 vLLM 上的 Qwen3-32B，分数很低，样本在思考过程中间就停了。\n"
        "models = [dict(abbr='qwen3-32b-vllm', type=OpenAISDK, path='Qwen/Qwen3-32B', "
        "openai_api_base='http://127.0.0.1:8000/v1', max_out_len=512, batch_size=16)]\n"
        'vllm:request_success_total{finished_reason="length",model_name="Qwen/Qwen3-32B"} 1187\n'
        'vllm:request_success_total{finished_reason="stop",model_name="Qwen/Qwen3-32B"} 132',
    ),
    "harness-evalscope-ja": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 1024},
        "evalscope で vLLM のサーバーを評価すると、ほとんどの回答が思考の途中で止まってしまいます。\n"
        "task_cfg = TaskConfig(model='DeepSeek-R1-Distill-Qwen-7B', api_url='http://127.0.0.1:8801/v1', "
        "eval_type='service', datasets=['math_500'], generation_config={'max_new_tokens': 1024, 'temperature': 0.6})\n"
        "# HELP vllm:request_success_total Count of successfully processed requests.\n"
        "# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="ds"} 488.0\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="ds"} 12.0',
    ),
    "harness-lm-eval-cli-en": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512},
        "lm_eval --model local-chat-completions --tasks gsm8k_cot --apply_chat_template --gen_kwargs "
        "max_gen_toks=512,temperature=0\nEvery sample of the reasoning model stops in the middle of the thinking; "
        '/metrics shows vllm:request_success_total{finished_reason="length"} 1319',
    ),
    "harness-evalscope-metrics-only": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 2048},
        "evalscope eval --model qwq-32b --api-url http://127.0.0.1:8000/v1/chat/completions --eval-type service "
        "--datasets aime24 --generation-config max_new_tokens=2048,temperature=0.6\n"
        'vllm:request_success_total{finished_reason="abort"} 0.0\n'
        'vllm:request_success_total{finished_reason="length"} 30.0\n'
        'vllm:request_success_total{finished_reason="stop"} 0.0\n'
        "The accuracy is 0.0 on AIME while the model card says 79.5.",
    ),
    "harness-opencompass-ko-no-cut-words": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 512},
        "OpenCompass로 vLLM 서버의 DeepSeek-R1-Distill-Qwen-14B를 평가했는데 점수가 이상합니다.\n"
        "dict(type=OpenAISDK, path='ds-14b', openai_api_base='http://gpu01:8000/v1', max_seq_len=32768, "
        "batch_size=8)\n"
        "| metric | value |\n|---|---|\n"
        '| vllm:request_success_total{finished_reason="length"} | 1319 |\n'
        '| vllm:request_success_total{finished_reason="stop"} | 0 |',
    ),
    "harness-lm-eval-ko-long-cap": (
        "max_tokens_default_truncation",
        {"default_max_tokens": 4096},
        "lm_eval --model local-chat-completions --tasks aime24 --gen_kwargs max_gen_toks=4096\n"
        "추론 모델 답변이 생각하는 도중에 끊겨요.",
    ),
    "retold-startup-zh": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 8.0, "kv_available_gib": 3.12, "estimated_max_model_len": 12768},
        "vllm serve Qwen/Qwen3-8B 启动失败，报错大意是 max seq len 32768 需要 8.0 GiB 的 KV cache，但可用的只有 "
        "3.12 GiB，估计最大长度是 12768。显卡是 4090。",
    ),
    "retold-startup-ja": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 8.0, "kv_available_gib": 3.1, "estimated_max_model_len": 12688},
        "起動すると落ちます。エラーは max seq len 32768 だと KVキャッシュが 8 GiB 必要だが 3.1 GiB しかない、"
        "推定最大長は 12688 だそうです。",
    ),
    "retold-startup-ko": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 40960, "kv_needed_gib": 6.0, "kv_available_gib": 2.5, "estimated_max_model_len": 17072},
        "서버가 시작되지 않습니다. 에러 내용은 max seq len 40960에는 KV 캐시 6 GiB가 필요한데 사용 가능한 것은 "
        "2.5 GiB뿐이고, 추정 최대 모델 길이는 17072라는 것입니다.",
    ),
    "retold-startup-ru": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_needed_gib": 16.0, "kv_available_gib": 9.63, "estimated_max_model_len": 78848},
        "vLLM не стартует: для max seq len 131072 нужно 16 GiB KV-кэша, а доступно только 9.63 GiB, оценка "
        "максимальной длины 78848.",
    ),
    "retold-startup-en": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 32768, "kv_needed_gib": 8.0, "kv_available_gib": 3.1, "estimated_max_model_len": 12768},
        "The engine fails at startup: needs 8 GiB of KV cache for max seq len 32768 but only 3.1 GiB is available, "
        "estimated max model length is 12768.",
    ),
    "retold-startup-zh-cache-first": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_needed_gib": 10.0, "kv_available_gib": 4.2},
        "启动时报错：max_model_len 65536 需要 KV 缓存 10 GiB，可用 KV 缓存只有 4.2 GiB。",
    ),
    "tried-lengths-separators": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_cache_tokens": 75776},
        "| --max-model-len | started | GPU KV cache size | Maximum concurrency |\n|---|---|---|---|\n"
        "| 8,192 | yes | 75,776 tokens | 9.25x |\n| 16,384 | yes | 75,776 tokens | 4.62x |\n"
        "| 131,072 | **no** | — | — |",
    ),
    "tried-lengths-zh-marks": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 65536, "kv_cache_tokens": 52416},
        "试了几个长度：\n| max_model_len | 能否启动 | KV cache 大小 | 最大并发 |\n| --- | --- | --- | --- |\n"
        "| 16384 | ✅ 是 | 52,416 tokens | 3.20x |\n| 32768 | ✅ 是 | 52,416 tokens | 1.60x |\n"
        "| 65536 | ❌ **否** | | |",
    ),
    "tried-lengths-list": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 98304, "kv_cache_tokens": 81920},
        "- `--max-model-len 32768`: **starts**, GPU KV cache size: 81,920 tokens, Maximum concurrency 2.50x\n"
        "- `--max-model-len 65536`: **starts**, GPU KV cache size: 81,920 tokens, Maximum concurrency 1.25x\n"
        "- `--max-model-len 98304`: **does not start**",
    ),
    "tried-lengths-csv-quoted": (
        "kv_cache_too_small_at_startup",
        {"max_model_len": 131072, "kv_cache_tokens": 75776},
        'max_model_len,started,GPU KV cache size (tokens),Maximum concurrency\n"16,384",yes,"75,776",4.62x\n'
        '"32,768",yes,"75,776",2.31x\n"131,072",**no**,,',
    ),
    "oom-contrast-ko": (
        "cuda_oom_runtime",
        {},
        "Qwen2.5-VL-7B 서빙 중입니다. 1~2분짜리 영상은 괜찮은데 10분짜리 회의 녹화를 보내면 서버가 죽습니다.\n"
        + V1_FORWARD_OOM.format(model="qwen2_5_vl", alloc="14.20"),
    ),
    "oom-contrast-ja": (
        "cuda_oom_runtime",
        {},
        "短い動画は大丈夫だが、30分の動画を送るとサーバーが落ちる。\n"
        + V1_FORWARD_OOM.format(model="qwen2_vl", alloc="9.75"),
    ),
    # the traceback alone, after V1's line that the running engine died
    "oom-contrast-none-fatal-line": ("cuda_oom_runtime", {}, FATAL + V1_FORWARD_OOM.format(model="llava", alloc="6.0")),
    "oom-contrast-zh": (
        "cuda_oom_runtime",
        {},
        "短视频没问题，长视频一发就崩了。\n" + V1_FORWARD_OOM.format(model="qwen2_5_vl", alloc="11.3"),
    ),
    "oom-contrast-en": (
        "cuda_oom_runtime",
        {},
        "Short clips are fine, but a one hour lecture recording takes the server down:\n"
        + V1_FORWARD_OOM.format(model="llava_onevision", alloc="21.00"),
    ),
    "ray-multiline-ru": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 4096, "max_model_len": 16384},
        "from ray import serve\nfrom ray.serve.llm import LLMConfig, build_openai_app\n\nllm_config = LLMConfig(\n"
        '    model_loading_config=dict(\n        model_id="qwen",\n        model_source="Qwen/Qwen2.5-7B-Instruct",\n'
        "    ),\n    engine_kwargs=dict(\n        max_model_len=16384,\n        max_num_batched_tokens=4096,\n"
        "        enable_chunked_prefill=False,\n        tensor_parallel_size=2,\n    ),\n)\n"
        "Деплой падает, в логе что-то про SchedulerConfig и что max_num_batched_tokens меньше max_model_len.",
    ),
    "ray-multiline-en": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 8192},
        "llm_config = LLMConfig(\n    model_loading_config=dict(model_id='llama', model_source='meta-llama/"
        "Llama-3.1-8B-Instruct'),\n    engine_kwargs=dict(\n        max_model_len=8192,\n"
        "        max_num_batched_tokens=2048,\n        enable_chunked_prefill=False,\n    ),\n)\n"
        "The replica never becomes healthy; the error mentions SchedulerConfig, the batched tokens being smaller "
        "than the max model len.",
    ),
    "ray-yaml-zh": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 8192, "max_model_len": 32768},
        "applications:\n- name: llm\n  args:\n    llm_configs:\n      - model_loading_config:\n"
        "          model_id: qwen\n        engine_kwargs:\n          max_model_len: 32768\n"
        "          max_num_batched_tokens: 8192\n          enable_chunked_prefill: false\n"
        "serve run config.yaml 启动失败，SchedulerConfig 校验报错，说 max_num_batched_tokens 小于 max_model_len。",
    ),
    "ray-dict-literal-de": (
        "batched_tokens_lt_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 65536},
        'LLMConfig(\n    model_loading_config={"model_id": "llama"},\n    engine_kwargs={\n'
        '        "max_model_len": 65536,\n        "max_num_batched_tokens": 2048,\n'
        '        "enable_chunked_prefill": False,\n    },\n)\n'
        "Beim Start bricht es ab, irgendwas mit SchedulerConfig: max_num_batched_tokens sei kleiner als max_model_len.",
    ),
}

LOOK_ALIKES = {
    # a server that started, refusing a second image: a per-prompt multimodal limit
    "started-image-limit-ja": "INFO 10-02 [kv_cache_utils.py:716] GPU KV cache size: 123,456 tokens\n"
    "INFO:     Application startup complete.\n画像を2枚送ると 400 が返ります:\n"
    '{"error": {"message": "At most 1 image(s) may be provided in one prompt.", "type": "BadRequestError", '
    '"code": 400}}\nKVキャッシュが足りないのでしょうか?',
    "started-image-limit-en": "The server started fine (GPU KV cache size: over 100,000 tokens), but sending two "
    "images gives 400: At most 1 image(s) may be provided in one prompt. Is the KV cache too small?",
    "started-lora-rank": "GPU KV cache size: 212,992 tokens\nMaximum concurrency for 32,768 tokens per request: "
    "6.50x\nopenai.BadRequestError: Error code: 400 - {'message': 'LoRA rank 64 is greater than max_lora_rank 16.'}",
    # the harness's cap, but most requests ended by themselves: the cap cut nothing
    "harness-mostly-stopped": "lm_eval --model local-completions --gen_kwargs max_gen_toks=1024 --tasks gsm8k\n"
    'vllm:request_success_total{finished_reason="length"} 12\n'
    'vllm:request_success_total{finished_reason="stop"} 1307\nThe score is 0.71, a bit below the paper.',
    # every length tried started, the longest within the KV cache
    "tried-lengths-all-started": "| --max-model-len | started | GPU KV cache size |\n|---|---|---|\n"
    "| 8,192 | yes | 75,776 tokens |\n| 32,768 | **yes** | 75,776 tokens |",
    # chunked prefill on: a step budget below the context is how chunks work, whatever the retold complaint
    "ray-chunked-on": "engine_kwargs=dict(\n    max_model_len=32768,\n    max_num_batched_tokens=4096,\n"
    "    enable_chunked_prefill=True,\n)\nIs it a problem that max_num_batched_tokens is smaller than max_model_len?",
    "started-tools": "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768\nGPU KV cache size: 310,000 tokens\n"
    '400 Bad Request: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    # the server said in words to have started; a second image refused: per-prompt limit, not the KV cache
    "started-told-image-limit-ja": "起動ログでは GPU KV cache size: 100,000 tokens 以上あり、サーバーは普通に動いています。"
    "でも画像を2枚送ると 400 (At most 1 image(s) may be provided in one prompt) が返ります。KVキャッシュが足りないのでしょうか？"
    " max_model_len は 131072 です。",
    "started-told-image-limit-en": "The server starts fine with --max-model-len 131072 and logs GPU KV cache size: "
    "98,304 tokens. Sending 3 images returns 400: At most 2 image(s) may be provided in one prompt. Is the KV cache "
    "too small for 131072?",
    "started-told-lora-zh": "服务起来了，GPU KV cache size: 45,000 tokens，max_model_len 65536。请求报 400：LoRA rank 64 "
    "is greater than max_lora_rank 16. 是不是 KV cache 不够？",
    "started-told-kv-question": "The server starts fine with --max-model-len 131072 and logs GPU KV cache size: 98,304 "
    "tokens. Is the KV cache too small for 131072?",
    "started-kv-size-only-zh": "服务正常启动了，日志里 GPU KV cache size: 45,000 tokens，max_model_len 32768。"
    "请问 KV cache 够用吗？",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_report_told_in_this_form_gets_its_cause_and_numbers(name):
    check_cause_and_numbers(name, CASES[name])


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_a_look_alike_gets_no_memory_or_length_cause(name):
    check_no_memory_or_length_cause(name, LOOK_ALIKES[name])


KINDS = ("retold-request", "harness", "retold-startup", "tried-lengths", "oom-contrast", "ray")


def test_every_kind_is_written_in_three_forms():
    assert written_in_three_forms(CASES, KINDS)


@pytest.mark.parametrize(
    ("cap", "words"), [(4000, "within 96 tokens of"), (4096, "as large as"), (5000, "larger than")]
)
def test_a_cap_near_the_context_is_told_as_it_stands_against_it(cap, words):
    text = (
        f"vllm serve m --max-model-len 4096\nMax Tokens (num_predict) set to {cap} in the UI, now HTTP 400 Bad Request"
    )
    finding = diagnose_text(text).findings[0]
    assert f"max_tokens {cap} alone is {words} max_model_len 4096" in finding.summary


def test_a_counter_of_finished_requests_is_read_with_its_reason():
    text = 'vllm:request_success_total{finished_reason="length",model_name="m"} 1319.0'
    facts = {fact.quantity: fact.value for fact in diagnose_text(text).context.facts}
    assert facts["requests_finished_length"] == 1319


def test_a_forward_out_of_memory_that_nothing_places_stays_unplaced():
    text = "Loading the model takes a while.\n" + V1_FORWARD_OOM.format(model="qwen2_5_vl", alloc="14.20")
    assert [f.stage for f in diagnose_text(text).findings] == ["unknown"]
