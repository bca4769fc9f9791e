"""The words of prose that name a quantity, matched against the few words around a number of its kind (facts.py's
`worded` reading): English, Chinese, Japanese, Korean, Spanish, German, Russian, Portuguese and French, as people
write them beside vLLM's own names. A quantity's gates are substrings (lowercase) every match of its words holds: a
line without any of them is not searched for its words."""

import re

from kvtool.engine.diagnosis.quantities import (
    BATCHED,
    BLOCKS,
    COMPLETION_TOKENS,
    CONCURRENCY,
    KV_USAGE,
    MAX_MODEL_LEN,
    MAX_TOKENS,
    PREEMPTIONS,
    PROMPT_TOKENS,
    RUNNING,
    TOTAL_GIB,
    TPOT,
    TTFT,
    UTILIZATION,
    WAITING,
    Quantity,
    _q,
    words,
)

_COUNTED = r"(?= ?[\d.,]+[kK]? ?(?:tokens?|words)\b)"  # a number of tokens follows ("only 16 tokens")
_PROSE = {
    # before max_model_len, whose words end where its own do ("estimated max model length of 58976")
    _q("estimated_max_model_len"): (
        r"estimated (?:max(?:imum)? )?(?:model |context )?length(?: of| is)?",
        r"估计的?最大(?:模型)?长度(?:为|是)?|推定最大(?:モデル)?長",
        r"longitud máxima estimada(?: de)?|comprimento máximo estimado(?: de)?|geschätzte maximale \w*länge(?: von)?",
        r"추정(?:된)? ?최대 ?(?:모델 ?)?길이(?:는|가|은)?|оценк\w* максимальн\w* длин\w*",
    ),
    MAX_MODEL_LEN: (
        r"concurrency for",  # vLLM's "Maximum concurrency for 32,768 tokens per request"
        r"max(?:imum)?[ _-]?(?:model|context|seq(?:uence)?)[ _-]?len(?:gth)?(?: of)?",
        r"context (?:length|window|size|len)(?: of| is)?|max(?:imum)? context(?: of| is)?",
        r"上下文(?:长度|窗口)?(?:为|是)?|最大(?:模型)?长度(?:为|是)?",
        r"コンテキスト長|最大(?:モデル)?長|컨텍스트 ?길이|최대 ?길이",
        r"(?:longitud|ventana|tamaño) (?:máxima )?del? contexto|contexto máximo|Kontext(?:länge|fenster)",
        r"длин\w* контекста|контекст\w* (?:длиной|в)|(?:comprimento|janela) (?:máximo )?(?:de|do) contexto",
        r"longueur (?:maximale )?(?:de|du) contexte|contexte maxim\w*(?: du modèle)?(?: est)?(?: de)?",
        r"최대 ?컨텍스트(?:는|가|은)?|컨텍스트(?:는|가)",
    ),
    MAX_TOKENS: (
        r"max(?:imum)?[ _-]?(?:number of )?(?:new[ _-]|output[ _-]|completion[ _-]|generat\w*[ _-])?tokens"
        r"(?: of| is| to)?",
        r"in the completion|最大输出(?:长度)?|输出长度|最大(?:出力)?トークン数?|최대 ?(?:출력 ?)?토큰",
        r"máximo de tokens|tokens máximos|maximale[n]? (?:Anzahl (?:an |der )?)?(?:Ausgabe)?tokens",
        r"максимальн\w* (?:число |количество )?токенов",
        # a chat UI's output cap: "Max Tokens (num_predict)", "maximum output length", 最大标记, 最大輸出長度
        r"max(?:imum)? (?:output|response|generation|completion|answer) length|最大(?:标记|標記|輸出)(?:数|長度)?",
        r"longitud máxima de (?:la )?(?:salida|respuesta)|maximale Ausgabelänge|comprimento máximo da resposta",
        r"максимальн\w* длин\w* (?:ответа|вывода|генерации)|최대 ?(?:출력|응답) ?길이",
    ),
    # a benchmark's totals over every request ("Total input tokens: 1024000"): no prompt's length
    _q("benchmark_total_tokens"): (r"total (?:input|prompt|generated|output) tokens:?",),
    PROMPT_TOKENS: (
        r"(?:prompt|input)s?[ _-]?(?:length|len|tokens?)(?: of| is)?",
        r"(?:prompt|input)s? (?:has|had|have|contains?|contained|is|was|were|of|with)(?: about| at least)?",
        r"in the (?:messages|prompt|input)",
        r"输入(?:长度|token数?)|提示词?长度|入力(?:長|トークン数?)|プロンプト(?:長|のトークン数?)|입력 ?(?:길이|토큰)",
        r"프롬프트 ?(?:길이|토큰)|프롬프트(?:는|가|의 길이는)(?: 대략| 약)?",
        r"提示(?:词)?(?:长度)?(?:约|大约|大概|有|为|是)+",
        r"tokens de entrada|Eingabe(?:länge|tokens)|(?:промпт|вход)\w* (?:длиной|из|содержит)",
        r"(?:prompt|entrada|Eingabe) (?:tiene|tem|hat|de|com|mit|es|son|ist|é|fait)"
        r"(?: de)?(?: unos| unas| cerca de| alrededor de| etwa| rund| ca\.| aproximadamente| environ)?",
        r"プロンプト(?:が|は)(?:約|およそ)?",
        # the reporter's own request ("my message has ~19200 tokens", "mi mensaje tiene", 我的输入有 9000 多)
        r"(?:my|our|the) (?:message|request|prompt|input|document)s?(?: (?:has|had|have|is|was|contains?))?"
        r"(?: about| around| roughly| approximately| nearly| over)?",
        r"(?:mensaje|mensagem|petición|solicitud|Nachricht|Anfrage|сообщени\w*|запрос\w*) "
        r"(?:tiene|tem|hat|содержит|имеет|—|-)?(?: unos| unas| cerca de| etwa| rund| около| примерно)?",
        r"输入(?:有|为|是|约|大约|大概|达到)+|输入 ?token ?数?(?:约|大约|为|是|有)*|入力(?:が|は)(?:約|およそ)?"
        r"|입력(?:이|은)(?: 약| 대략)?",
        r"(?:mon |ma )?(?:message|requête|entrée) (?:fait|a|contient|compte)(?: environ| à peu près)?",
        # the inputs that failed, by their length: "documents of 32768 tokens", "на документах по 32768 токенов"
        r"(?:documents?|texts?) of(?: about| around)?|(?:документ|текст)\w* (?:по|из|длиной)(?: около)?|"
        r"(?:Dokument|Text)\w* (?:mit|von)(?: etwa| rund)?|document(?:o|s|os)? (?:de|con)(?: unos| cerca de| environ)?",
    ),
    COMPLETION_TOKENS: (
        r"completion[ _]tokens|output tokens|generated tokens",
        r"(?:only|just|stops? (?:at|after)|cut (?:off|short) (?:at|after)|truncated (?:at|after)|after)" + _COUNTED,
        r"(?:answers?|outputs?|responses?|replies|completions?|text)(?: is| are| was| were)? (?:exactly|always)"
        + _COUNTED,
        r"只(?:输出|生成)了?",
    ),
    UTILIZATION: (
        r"utili[sz]ation(?: of| is| at| to)?|gpu[ _-]?util|\butil\b|vs\.? desired",  # the start-up check's, retold
        r"显存利用率|利用率|使用率の上限",
    ),
    _q("cpu_kv_cache_usage_percent", "percent"): (r"CPU KV cache usage",),
    KV_USAGE: (
        r"(?:KV[ -]?)?cache(?: usage| utili[sz]ation| use| occupancy| is| was| at| reached| hits?| full)*(?: of)?",
        r"KV usage|cache usage|KV ?缓存(?:使用率|占用率?)?|KV ?キャッシュ(?:使用率)?|KV ?캐시(?: ?사용률)?",
        r"(?:uso|ocupación|ocupação) d[eoa]l? (?:la )?(?:caché|cache) KV|(?:caché|cache) KV",
        r"KV-Cache(?:-Auslastung| Auslastung)?|(?:использование |заполнение )?KV[- ]?кэш\w*",
    ),
    _q("prefix_cache_hit_rate_percent", "percent"): (r"prefix cache hit rate|hit rate",),
    RUNNING: (
        r"running(?: requests)?|in flight|正在运行|运行中|実行中|실행 ?중",
        r"en ejecución|em execução|laufend\w*",
    ),
    WAITING: (
        r"waiting(?: requests)?|pending|queued|排队|等待|待ち|待機|대기",
        r"en espera|em espera|wartend\w*|в очереди",
    ),
    CONCURRENCY: (
        r"concurren(?:cy|t requests?|t users)(?: of)?|并发(?:数|请求)?",
        r"同時(?:実行|接続|リクエスト)数?|並列数|동시 ?(?:요청|접속|실행)",
        r"concurrencia|(?:usuarios|peticiones|solicitudes) concurrentes|concorrência|(?:usuários|requisições) "
        r"simultâne[ao]s|gleichzeitige[n]? (?:Anfragen|Nutzer)|одновременн\w*",
    ),
    PREEMPTIONS: (r"preemptions?(?:_total)?|抢占(?:次数)?|プリエンプション",),
    TPOT: (r"TPOT|time per output token|ITL|inter[- ]token latency|decode latency",),
    TTFT: (r"TTFT|time to first token|首(?:个)?token",),
    _q("kv_cache_tokens"): (
        r"KV cache size:?|KV cache (?:can )?(?:only )?(?:holds?|stores?|fits?)(?: only)?",
        r"(?:number of )?tokens (?:that )?can be stored in (?:the )?KV cache(?:,? which is)?(?: only)?",
        r"KV ?(?:cache|缓存) ?(?:只能|最多)(?:存|容纳|放)下?",
        r"KV ?(?:cache|缓存) ?(?:大小|容量)|KV ?キャッシュ ?(?:サイズ|容量)|KV ?캐시 ?(?:크기|용량)",
    ),
    BLOCKS: (r"# ?(?:GPU|cuda) blocks:?|GPU blocks",),
    _q("num_cpu_blocks"): (r"# ?CPU blocks:?",),
    BATCHED: (r"max[ _-]num[ _-]batched[ _-]tokens",),
}
_GIB = "gib"
_FREE = (
    r"free|available|left|剩余|可用|空闲|空き|使用可能|여유|사용 ?가능"
    r"|libres?|disponibles?|disponíve(?:l|is)|livres?|frei|verfügbar|свободн\w*|доступн\w*"
)
_IN_USE = r"in use|used|占用|使用中|사용 ?중|en uso|em uso|usad[oa]s?|ocupad[oa]s?|belegt|занят\w*|использован\w*"
_MEMORY = {
    _q("tried_to_allocate_gib", _GIB): (r"allocate",),
    _q("kv_needed_gib", _GIB): (
        r"needs? (?:a |an )?KV cache of|KV cache (?:needs?|is needed)",
        r"KV ?(?:cache|缓存|キャッシュ|캐시) ?(?:需要|が必要|필요)",
        r"(?:需要|必要な|필요한) ?KV ?(?:cache|缓存|キャッシュ|캐시)",
    ),
    _q("kv_available_gib", _GIB): (r"(?:available )?KV cache (?:memory|size)|kv_cache_size|KV ?缓存",),
    _q("weights_gib", _GIB): (r"weights?(?: take| took| of)?|model loading took|权重|重み|가중치",),
    _q("requested_gib", _GIB): (
        r"request(?:ed|s)?|requir(?:ed|es)|desired|asks? for|needs?|要求的?|需要|请求(?:需)?要|必要|필요",
        r"necesit\w*|requerid\w*|solicitad\w*|benötigt|erforderlich|angefordert|verlangt|требует\w*|нужн\w*|necessári\w*",
    ),
    _q("this_process_gib", _GIB): (r"(?:this process|vLLM) (?:has|holds|uses)|" + _IN_USE,),
    _q("free_gib", _GIB): (_FREE,),
    TOTAL_GIB: (
        r"(?:free|available|left) (?:out )?of|de un total de|von insgesamt|из",
        r"total(?: capacity| memory)?(?: of)?|capacity of|VRAM|(?:GPU|card) (?:has|with)",
        r"GPU|card|显存|总|合計|総(?:容量|メモリ)|총|전체|insgesamt|gesamt|всего",
    ),
}
_GATES = {
    "estimated_max_model_len": ("estimated", "估计", "推定", "estimad", "geschätzt", "추정", "оценк"),
    "benchmark_total_tokens": ("total",),
    "max_model_len": ("len", "concurrency", "上下文", "长度", "コンテキスト", "最大", "컨텍스트", "최대", "context",
                      "kontext", "контекст", "contexte", "長さ", "길이"),
    "max_tokens": ("token", "completion", "输出", "トークン", "토큰", "токен", "length", "标记", "標記", "輸出",
                   "longitud", "ausgabe", "comprimento", "длин", "길이"),
    "prompt_tokens": ("prompt", "input", "num_tokens", "message", "request", "document", "输入", "提示", "入力",
                      "プロンプト", "입력", "프롬프트", "entrada", "eingabe", "промпт", "вход", "mensaje", "mensagem",
                      "petición", "solicitud", "nachricht", "anfrage", "сообщени", "запрос", "requête", "entrée",
                      "text", "документ", "текст", "dokument"),
    "completion_tokens": ("token", "only", "just", "stop", "cut", "truncat", "after", "只"),
    "gpu_memory_utilization": ("util", "desired", "利用率", "使用率"),
    "cpu_kv_cache_usage_percent": ("cpu",),
    "kv_cache_usage_percent": ("cache", "kv", "caché", "кэш"),
    "prefix_cache_hit_rate_percent": ("hit rate",),
    "num_running": ("running", "in flight", "运行", "実行", "실행", "ejecución", "execução", "laufend"),
    "num_waiting": ("waiting", "pending", "queued", "排队", "等待", "待", "대기", "espera", "wartend", "очеред"),
    "concurrency": ("concurren", "并发", "同時", "並列", "동시", "concorr", "gleichzeitig", "одновременн"),
    "num_preemptions": ("preempt", "抢占", "プリエンプション"),
    "tpot_ms": ("tpot", "time per", "itl", "inter", "latency"),
    "ttft_ms": ("ttft", "first token", "首"),
    "kv_cache_tokens": ("kv",),
    "num_gpu_blocks": ("blocks",),
    "num_cpu_blocks": ("blocks",),
    "max_num_batched_tokens": ("batched",),
    "tried_to_allocate_gib": ("allocate",),
    "kv_needed_gib": ("kv cache", "kv缓存", "kv 缓存", "キャッシュ", "캐시"),
    "kv_available_gib": ("kv", "缓存"),
    "weights_gib": ("weight", "loading", "权重", "重み", "가중치"),
    "requested_gib": ("request", "请求", "requir", "desired", "ask", "need", "要求", "需要", "必要", "필요", "necesit",
                      "requerid", "solicitad", "benötigt", "erforderlich", "angefordert", "verlangt", "требует", "нужн",
                      "necessári"),
    "this_process_gib": ("process", "vllm", "in use", "used", "占用", "使用中", "사용", "uso", "usad", "ocupad",
                         "belegt", "занят", "использован"),
    "free_gib": ("free", "available", "left", "剩余", "可用", "空闲", "空き", "使用可能", "여유", "가능", "libre",
                 "disponib", "disponív", "livre", "frei", "verfügbar", "свободн", "доступн", "しか", "뿐", "밖에"),
    "total_gib": ("total", "capacity", "vram", "gpu", "card", "free", "available", "left", "显存", "总", "合計",
                  "総", "총", "전체", "gesamt", "всего", "из"),
}  # fmt: skip
# the words right before an HTTP status ("Error code: 400", "returns 400", 返回 400) and right after one ("400 Bad
# Request", "400 が返ってきます"): a status is no quantity, and a 4xx tells a request was refused
STATUS_BEFORE = (
    r"(?:error code|status(?: code)?|code|HTTP(?:/[\d.]+\"?)?|returns?|returned|responds? with|gives|got|error|"
    r"Fehler|erreur|devuelve|responde|retorna|antwortet mit|返回了?|报错?|状态码|エラー|에러|오류|상태 ?코드|ошибк\w*)"
)
STATUS_AFTER = r"(?:Bad Request|Client Error|Unprocessable|Internal Server Error|Not Found|error|错误|エラー|에러|が返)"
Words = list[tuple[Quantity, re.Pattern, tuple[str, ...]]]
WORDS: Words = [(q, words("|".join(patterns)), _GATES[q.name]) for q, patterns in _PROSE.items()]
MEMORY_WORDS: Words = [(q, words("|".join(patterns)), _GATES[q.name]) for q, patterns in _MEMORY.items()]
# the words that may follow a size and name it ("3.1 GiB free", "20.6 GiB in use", "24 GB VRAM", "16 GiB of KV cache
# is needed")
MEMORY_AFTER = {
    "kv_needed_gib": words(
        r"(?:of |de )?(?:KV[ -]cache|caché KV|KV ?缓存) "
        r"(?:(?:is |would be )?(?:needed|required)|(?=for |to hold |para ))"
        r"|の ?KV ?キャッシュ(?:が|を)?必要|의 ?KV ?캐시가 필요"  # "4 GiB の KV キャッシュが必要"
    ),
    "free_gib": words(_FREE + r"|しか|뿐|밖에"),  # "3.1 GiB しかない", "2.5 GiB뿐": only that much
    # "8 GiB 必要", "6 GiB가 필요한데", "16 GiB needed"
    "requested_gib": words(r"(?:が|가|이|を|을|를)? ?(?:必要|필요|需要|нужн\w*|(?:is |are )?(?:needed|required))"),
    "this_process_gib": words(r"(?:memory )?(?:" + _IN_USE + ")"),
    "total_gib": words(r"total|VRAM|of (?:GPU )?memory|显存|в сумме|insgesamt|en total|no total"),
}
# the words that may follow a number of another kind and name it, beside the quantity's own ("a 16k context")
# "a 16k context", "一个 32768 长度的请求" (a request as long as the context: V1's start-up check, retold)
_LENGTH_AFTER = r"|(?:token )?context\b|ctx\b|长度的请求|長さの(?:リクエスト|要求)|길이의 요청|length request"
AFTER_WORDS = {
    "max_model_len": words("|".join(_PROSE[MAX_MODEL_LEN]) + _LENGTH_AFTER),
    # "32768-token documents", "8k-token prompts"
    "prompt_tokens": words("|".join(_PROSE[PROMPT_TOKENS]) + r"|-?tokens? (?:documents?|prompts?|inputs?|texts?)\b"),
}
