"""A failure told in words rather than printed by vLLM, read per line shape as signs.py reads the rest: a request
refused (a 4xx status, the words of a length refusal in several languages), vLLM's start-up refusals retold ("no
memory for the cache blocks", "free memory below the utilization"), a harness's score far below another backend's.
Read in a paste only (told.py's rules use them): a machine's log states its failures in vLLM's words."""

import re
from functools import partial

from kvtool.engine.diagnosis.signs import Readers, read_line, told
from kvtool.engine.diagnosis.words import STATUS_AFTER, STATUS_BEFORE

# a request refused (a 4xx status, the refusal's words in several languages): the words of a length refusal
_REFUSED_WORDS = (
    r"Bad ?Request|invalid_request_error|maximum context length|context length (?:exceeded|is exceeded)|"
    r"最大上下文|上下文长度|超过.{0,12}(?:上下文|最大长度)|컨텍스트 ?길이|최대 ?컨텍스트|コンテキスト長|"
    r"longitud máxima|maximale Kontextlänge|comprimento máximo|longueur maximale|длин\w* контекста"
)
_STATUS = STATUS_BEFORE + r"\W{{0,3}}{0}\b|\b{0} ?" + STATUS_AFTER
_REFUSED = re.compile(_REFUSED_WORDS, re.I)  # a line of the shape tells a refusal
_STATUS_SHAPE = re.compile(_STATUS.format(r"\d{3}"), re.I)  # a line of the shape has a status: a 4xx?
_CLIENT_ERROR = re.compile(_STATUS.format(r"4\d\d"), re.I)
# vLLM's "No available memory for the cache blocks" retold: no memory, and the cache blocks, in several languages
_BLOCK_WORDS = (
    r"cache[- ]?bl(?:ocks?|öcke)|Cache-Blöcke|bloques de (?:la )?caché|blocos (?:de|do) cache|blocs de cache|"
    r"缓存块|キャッシュブロック|캐시 ?블록|блок\w* кэша"
)
_NO = (
    r"(?:\bno\b|\bkein\w*|\bnicht genug|\bsin\b|\bsem\b|\bnão há|\bnao ha|\bnenhum|\bpas de\b|\bnot enough\b|"
    r"没有|无|없|ない|нет)"
)
_ROOM = (
    r"(?:memory|Speicher|memoria|memória|mémoire|памят\w*|内存|显存|メモリ|메모리|可用|available|free|space|room|"
    r"espacio|espaço|Platz|left)"
)
_NO_BLOCKS = re.compile(
    rf"{_NO}.{{0,32}}{_ROOM}.{{0,32}}(?:{_BLOCK_WORDS})|(?:{_BLOCK_WORDS}).{{0,24}}(?:没有|不足|없|がない|нет)",
    re.IGNORECASE,
)
_BLOCK_GATES = ("block", "blöcke", "bloques", "blocos", "缓存块", "キャッシュブロック", "블록", "блок", "blocs")
_ON_DEVICE = r"(?:free|available) memory on (?:the )?device"  # the check's own words, quoted in another language
_ERROR = r"(?:error|エラー|错|錯|erreur|Fehler|ошибк|에러|오류)"
# vLLM's "Free memory on device ... is less than desired GPU memory utilization" retold: free memory, and less
# than the utilization asked, in several languages
_FREE_BELOW = re.compile(
    r"(?:free|available|livre|libre|disponible|frei|verfügbar|可用|空闲|剩余|여유|空き|свободн\w*).{0,64}"
    r"(?:less than|below|lower than|smaller than|menor que|menos que|inferior|weniger als|kleiner als|niedriger als|"
    r"小于|低于|不足|보다 적|より少な|меньше).{0,48}"
    r"(?:utili[sz]a\w*|Auslastung|利用率|사용률|使用率|использовани|утилизаци)|"
    # the check's own words quoted inside prose of another language ("ValueError sur la « free memory on device »")
    rf"{_ERROR}.{{0,40}}{_ON_DEVICE}|{_ON_DEVICE}.{{0,40}}{_ERROR}|"  # V1 prints the phrase at every start, too
    r"(?:free|available) memory\W.{0,48}\bvs\.? desired",  # "free memory 18.91/79.18 GiB vs desired 0.9"
    re.IGNORECASE,
)
_FREE_GATES = ("on device", "on the device", "desired",
               "less", "below", "lower", "smaller", "menor", "menos", "inferior", "weniger", "kleiner", "niedriger",
               "小于", "低于", "不足", "보다 적", "より少な", "меньше")  # fmt: skip
# a harness's score far below another backend's (what answers cut at its default cap look like)
_SCORE_DROP = re.compile(
    r"(?:far|much|way|significantly|dramatically) (?:below|lower|worse)|drops? (?:sharply|to)|远低于|低(?:很多|了很多)|"
    r"훨씬 낮|大幅に低|deutlich (?:niedriger|schlechter|unter)|muy por debajo|mucho (?:menor|peor)|bem abaixo|"
    r"muito (?:menor|pior)|bien en dessous|намного (?:ниже|хуже)",
    re.IGNORECASE,
)
_SCORE_GATES = ("below", "lower", "worse", "drop", "低", "낮", "deutlich", "debajo", "mucho", "abaixo", "muito",
                "dessous", "намного")  # fmt: skip
# vLLM's preemption warning quoted loosely, inside prose of any language
_PREEMPTED = re.compile(
    r"preempted by PreemptionMode|PreemptionMode\.(?:RECOMPUTE|SWAP)|not enough KV cache space",
    re.I,
)
_PREEMPTED_GATES = ("preemptionmode", "not enough kv cache space")
# SchedulerConfig's refusal of a step budget below max_model_len retold: "something about SchedulerConfig",
# "max_num_batched_tokens меньше max_model_len", "the batched tokens being smaller than the max model len"
_STEP, _LEN = r"(?:max[_ -]num[_ -]batched[_ -]tokens|batched[_ -]tokens)", r"(?:max[_ -]model[_ -]len(?:gth)?)"
_SMALLER = r"(?:smaller|less|lower|below|меньше|小于|低于|小さ|작|menor|kleiner|weniger|inférieur)"
_LARGER = r"(?:larger|greater|bigger|more|exceeds?|больше|превыша|大于|超过|大き|크|mayor|größer|supérieur)"
_STEP_BELOW = re.compile(
    rf"SchedulerConfig|{_STEP}.{{0,40}}{_SMALLER}.{{0,40}}{_LEN}|{_LEN}.{{0,40}}{_LARGER}.{{0,40}}{_STEP}", re.I
)
_STEP_GATES = ("schedulerconfig", "batched")
# a server told to have started and to serve: a start-up cause needs a start that failed
_UP_TOLD = re.compile(
    r"\b(?:server|it|vllm|engine|service|model)(?: itself)? (?:starts?|started|loads?|loaded|comes? up|came up|runs?|"
    r"is running|works?|serves?)(?: up)? (?:fine|normally|ok(?:ay)?|without (?:any )?(?:errors?|problems?|issues?))|"
    r"\b(?:server|it) is up\b|\bserver up\b|"
    r"服务(?:已经|能)?(?:起来了|正常启动|启动成功|正常运行)|(?:普通に|正常に)(?:動いて|起動|動作)|起動(?:は|には)?成功|"
    r"(?:정상적으로|잘) (?:뜨|실행되|시작되|동작하)|arranca (?:bien|sin errores)|el servidor (?:funciona|arranca) bien|"
    r"startet (?:normal|problemlos|ohne Fehler)|läuft (?:normal|problemlos)|"
    r"(?:запускается|работает|стартует) (?:нормально|без ошибок)",
    re.I,
)
_UP_GATES = ("fine", "normal", "ok", "without", "is up", "server up", "服务", "普通に", "正常に", "成功", "정상적으로",
             "잘 ", "arranca", "funciona", "startet", "läuft", "нормально", "без ошибок")  # fmt: skip
# a launch told not to start ("no longer starts", "ya no arranca", 起動しない, 起不来, не запускается)
_DOWN_TOLD = re.compile(
    r"\b(?:no longer|doesn'?t|does not|won'?t|will not|fails? to|can'?t|cannot) (?:start|launch|boot|come up)|"
    r"\b(?:ya )?no (?:arranca|inicia)|\bnão (?:inicia|sobe)|startet(?: \w+)? nicht|ne démarre (?:pas|plus)|"
    r"не (?:запускается|стартует)|起動しない|起動しなく|起動でき(?:ない|ません)|启动不了|起不来|启动失败|"
    r"실행되지 않|시작되지 않",
    re.I,
)
_DOWN_GATES = ("start", "launch", "boot", "come up", "arranca", "inicia", "sobe", "démarre", "запуска", "стартует",
               "起動", "启动", "起不来", "되지 않")  # fmt: skip
# a request that fails only once the conversation grows or a long document comes: the prompt outgrew something
_GREW_TOLD = re.compile(
    r"\b(?:once|when|as|after) (?:the |a |my )?(?:conversation|chat|history|context|thread)s? (?:grows?|gets? long)|"
    r"\b(?:attach|upload|paste|send|add)\w* (?:a |the |an? )?(?:very )?(?:long|large|big)(?:er)? "
    r"(?:pdf|document|doc|file|text)|\bafter (?:a few|several|many|\d+) (?:turns|messages|rounds)\b|"
    r"\b(?:with|for|on) (?:very )?long(?:er)? (?:pdfs?|documents?|conversations?|chats?)\b|"
    r"\blange[sn]? (?:Dokument|PDF|Gespräch|Chat)|(?:Chat|Gespräch|Verlauf) (?:länger wird|wächst)|"
    r"\bdocumento (?:largo|longo)|conversaci[óo]n (?:crece|se alarga)|conversa (?:cresce|fica longa)|"
    r"\blong document|document long|conversation s'allonge|"
    r"对话(?:一)?变长|对话轮数(?:多|一多)|长文档|长文本|会話が長く|長い(?:文書|ドキュメント|PDF)|履歴が長く|"
    r"대화가 길어|긴 (?:문서|PDF)|длинн\w* (?:документ|диалог|разговор|PDF)",
    re.I,
)
_GREW_GATES = ("conversation", "chat", "history", "context", "thread", "long", "large", "big", "turns", "messages",
               "rounds", "lange", "verlauf", "gespräch", "documento", "conversa", "变长", "对话", "长文", "長く",
               "長い", "길어", "긴 ", "длинн")  # fmt: skip
# a request refused for a limit that is no length and no memory: images or videos per prompt, a LoRA's rank, tools
_OTHER_LIMIT = re.compile(
    r"At most \d+ (?:image|video|audio)\(?s?\)? may be provided|limit[_-]mm[_-]per[_-]prompt|max[_-]lora[_-]rank|"
    r"LoRA rank \d+ is greater|max[_-]loras?\b.{0,40}exceed|too many tools|auto\W+tool choice requires|"
    # a request refused for what it is, not its length: a model not served, a tool's schema, a response format
    r"does not exist|model_not_found|Invalid tool|tool schema|json_schema|response_format|"
    r"validation error for (?:Chat)?CompletionRequest|Extra inputs are not permitted|"  # the request's own fields
    # a proxy or gateway in front refused it (body size, rate), or vLLM never answered: vLLM did not see the request
    r"Request Entity Too Large|Payload Too Large|client_max_body_size|Too Many Requests|rate limit|"
    r"Bad Gateway|Gateway Time-?out",
    re.I,
)
_OTHER_GATES = ("at most", "mm_per_prompt", "mm-per-prompt", "lora", "tools", "tool choice", "does not exist",
                "model_not_found", "tool", "schema", "response_format", "completionrequest",
                "extra inputs", "too large", "client_max_body_size", "too many requests", "rate limit",
                "gateway")  # fmt: skip
# vLLM's start-up refusals retold in words: LogContext's field for the line that tells it
_RETOLD = (
    ("no_blocks_told", _NO_BLOCKS, _BLOCK_GATES),
    ("free_below_told", _FREE_BELOW, _FREE_GATES),
    ("score_drop_told", _SCORE_DROP, _SCORE_GATES),
    ("preemption_told", _PREEMPTED, _PREEMPTED_GATES),
    ("step_below_told", _STEP_BELOW, _STEP_GATES),
    ("up_told", _UP_TOLD, _UP_GATES),
    ("down_told", _DOWN_TOLD, _DOWN_GATES),
    ("grew_told", _GREW_TOLD, _GREW_GATES),
    ("other_limit_refused", _OTHER_LIMIT, _OTHER_GATES),
)


def told_readers(shape: str) -> Readers:
    """What reads a failure told in words in lines of this shape: a refused request, vLLM's start-up refusals
    retold, a harness's score far below. Read in a paste only: a machine's log states its failures in vLLM's words
    (and its access lines' 400s would cost every line a reading)."""
    readers = []
    if _REFUSED.search(shape):
        readers.append(partial(read_line, "request_refused"))
    elif _STATUS_SHAPE.search(shape):
        readers.append(_read_client_error)
    lower = shape.lower()
    for name, regex, gates in _RETOLD:
        if told(regex, gates, shape, lower):
            readers.append(partial(read_line, name))
    return tuple(readers)


def _read_client_error(line: str, facts: dict) -> None:
    if _CLIENT_ERROR.search(line):
        facts["request_refused"] = line
