"""What a line says by its words rather than its numbers, read for the log's context: the model, the release and the
GPU it names, a server that came up, a start-up that failed, serving told in words (in several languages), a
unified-memory device, the KV cache check's frames, an accepted request, priority scheduling, a benchmark of random
prompts, a cut answer told, a client with a cap of its own, a setting said to mean no limit, vLLM's advice on the
utilization. Each reader is chosen per line shape (the regexes are digit-blind)."""

import re
from collections.abc import Callable
from functools import partial

from kvtool.engine.diagnosis import clients
from kvtool.engine.diagnosis.cut_words import answer_cut

# a GPU named in prose or a device line (the catalog knows its memory: log_budget.catalog_gpu)
_GPU_NAME = re.compile(  # digit-blind (its digits are classes): a line names a GPU where its shape does
    r"\b(?:RTX ?(?:A|PRO )?\d{4}(?: ?Ti| ?Ada)?|T\d|G[HB]\d{3}|MI\d{3}X?"
    r"|(?:A|H|B|L)\d{1,3}S?G?(?:[ -]?(?:SXM\d?|PCIe|NVL))?(?:[ -]?\d{2,3} ?GB)?"
    r"|V\d{3}(?:[ -]?SXM\d)?(?:[ -]?\d{2} ?GB)?)\b"
)
_SOME = r"(?:~|about |around |roughly |some |etwa |ca\. |rund |unos |unas |uns |umas |cerca de )?\d[\d,.]*\s?k? ?"
_ITEMS = r"(?:docs|documents|requests|prompts|samples|items|examples|batches|steps|iterations)"  # work, not time
# prose that places a failure while serving
_SERVING_TOLD = re.compile(
    r"\b(?:under (?:heavy )?load|during (?:inference|serving|generation|decoding)|while (?:serving|generating)|"
    r"after (?:running|serving) for|in production|推理(?:时|过程中)|运行一段时间后|压测|"
    r"bajo carga|en producción|unter Last|im Betrieb|под нагрузкой|sob carga|em produção|sous charge|"
    r"高負荷|負荷(?:時|をかけ)|本番|부하|운영 중)"
    # a run that went on for a while first: "runs for ~3k docs, then", "跑了大约 3000 条之后", "nach 2000 Dokumenten"
    rf"|\bruns? (?:fine )?for {_SOME}(?:{_ITEMS}|hours|minutes|days)\b"
    rf"|\b(?:after|processed|generated|scored) {_SOME}{_ITEMS}\b"
    r"|(?:跑|处理|生成)了.{0,8}(?:条|个|批)"
    rf"|\bnach {_SOME}(?:Dokumenten|Anfragen|Requests|Prompts|Schritten|Batches)\b"
    rf"|\b(?:después|depois) de {_SOME}(?:documentos|solicitudes|peticiones|requisições|prompts)\b"
    r"|\d\s?(?:건|개)(?:를| 정도)? ?(?:처리|생성)|\d\s?件(?:ほど|くらい)?(?:処理|生成)"
    # it worked first, for smaller inputs or earlier steps: "the first ~40 steps are fine", "1-2 minute videos are
    # fine", "short prompts work", "Первые 40 шагов всё нормально", "짧은 입력은 잘 되는데", "前 40 步正常"
    rf"|\bfirst {_SOME}{_ITEMS} (?:are|were|go|went|run|ran|work\w*) (?:fine|ok|well)"
    r"|\b(?:short|small|smaller|shorter)(?: \w+)? \w+ (?:are|is|were|was|work\w*|run) (?:fine|ok|okay|well)"
    r"|\b[\d-]+ ?(?:minute|min|second|page)s? (?:videos?|clips?|documents?) "
    r"(?:are|were|work) (?:fine|ok)|\bперв\w* (?:~|около )?\d+ (?:шаг\w*|запрос\w*|итерац\w*)"
    r"|\bкоротк\w* \w+ работа\w*|짧은 \w+(?:은|는) 잘|처음 \d+ ?(?:스텝|단계|개)|前 ?\d+ ?(?:步|个|条)(?:都)?正常"
    # a contrast: the smaller input is fine, the larger one fails ("1~2분짜리 영상은 괜찮은데 ... 보내면",
    # "短い動画は大丈夫だが ... と落ちる", "短视频没问题，长视频就崩了", "kurze Videos gehen, lange nicht")
    r"|(?:은|는|이|가) (?:괜찮|문제 ?없|잘 ?되)\w*데.{0,60}(?:면|니까)"
    r"|(?:は|なら)(?:大丈夫|問題(?:ない|なく|ありません)|平気)\w{0,6}(?:が|けど|けれど)[、,]?.{0,60}(?:と|ば|たら)"
    r"|短.{0,6}(?:没问题|没事|正常|可以)[，,].{0,30}(?:就|一)"
    r"|\b(?:los|las) \w+ cort[oa]s (?:funcionan|van bien)|\bkurze \w+ (?:gehen|funktionieren|laufen)"
    # "on short texts all is fine", "works fine with text, but", "На коротких текстах всё ок", "funciona bem com"
    r"|\bon short \w+,? (?:all is|everything is|it is|it's|it works?) ?(?:fine|ok|okay|well)?"
    r"|\bworks? (?:fine|ok|well) (?:with|for|on) (?:short|small|text)|\bна коротк\w* \w+ (?:вс[её] )?(?:ок|норм|хорош)"
    r"|\bfunciona bem com \w+,? mas|\bfunciona bien con \w+,? pero|\bmit kurzen \w+ (?:läuft|geht|klappt|funktioniert)"
    r"|\b\w+ cort[oa]s,? (?:todo )?(?:va|van|funciona\w*|anda\w*) bien|\b\w+ courts?,? (?:tout va bien|ça marche)"
    # a failure that recurs through the day: the server ran between ("twice a day", "duas vezes por dia")
    r"|\b(?:once|twice|\w+ times) (?:a|per) (?:day|hour)|vezes por (?:dia|hora)|veces (?:al|por) día|"
    r"mal (?:am|pro) Tag|раз\w* в (?:день|сутки|час)|每天.{0,4}次"
    r"|\bprompt_logprobs\b",  # a request's parameter: requests come only once the server serves
    re.IGNORECASE,
)
_SERVING_GATES = (
    "load", "during", "while", "after", "production", "推理", "运行", "压测", "carga", "producción", "last", "betrieb",
    "нагрузк", "produção", "charge", "負荷", "本番", "부하", "운영", "runs", "run ", "processed", "generated", "scored",
    "了", "nach", "después", "depois", "건", "개", "件", "first", "short", "small", "video", "перв", "коротк", "짧은",
    "처음", "正常", "괜찮", "없는데", "되는데", "大丈夫", "問題", "平気", "没问题", "没事", "可以", "cort", "kurze",
    "works", "funciona", "на коротк", "once", "twice", "times", "vezes", "veces", "mal ", "раз", "每天",
    "prompt_logprobs", "mit kurzen", "court",
)  # fmt: skip
# devices whose GPU shares the system's memory: NVIDIA GB10 (DGX Spark), Jetson, AMD's APUs (Strix Halo, Ryzen AI)
_UNIFIED = re.compile(r"GB10\b|DGX Spark|Jetson|AGX Thor|Strix Halo|gfx115[01]|Ryzen AI|AI Max|unified memory|统一内存")
# frames of vLLM's check that the KV cache holds one max_model_len request (v0's initialize_cache raises it)
_CACHE_CHECK = (
    "raise_if_cache_size_invalid",
    "method initialize_cache",
    "in initialize_cache",
    "enough_kv_cache_memory",
)
# words that say a setting means "no limit" (a client's -1)
_UNLIMITED = re.compile(
    r"\bno limit|\bunlimited|\binfinite|without (?:a |any )?limit|sin l[ií]mite|ilimitad|unbegrenzt|без ограничени|"
    r"無制限|무제한|无限制?|不限制?",
    re.IGNORECASE,
)
_UNLIMITED_GATES = (
    "limit", "infinite", "límite", "ilimitad", "unbegrenzt", "ограничени", "無制限", "무제한", "无限", "不限",
)  # fmt: skip
# the OpenAI server's log of a request it took (its chat or completion id), which passed its length check first
_ACCEPTED = re.compile(r"(?:Added|Received) request (?:chat)?cmpl-")
_MODEL = re.compile(
    r"""(?:vllm serve|--model[= ]|\bmodel=|['"]model['"]: |Starting to load model"""
    # a container's command as a list (`["vllm", "serve", "m"]`), the image's entrypoint given the model alone
    r"""|\bvllm['"],\s*['"]serve['"],|vllm-openai:[\w.-]+[ \t]+(?=\w)(?![\w.-]+:(?:\s|$)))\s*['"]?([\w./:@-]+[\w])"""
)
_VERSION = re.compile(r"vLLM (?:API server )?version (\d+\.\d+[\w.+]*)")
# vLLM's advice on its CUDA graph line (0.18 - 0.19), which the start-up reader does not keep
_SUGGESTED_UTILIZATION = re.compile(r"increas(?:e|ing) --gpu-memory-utilization (?:from [\d.]+ )?to (\d+(?:\.\d+)?)")
# a kubelet that killed the container for a failed probe (exit code 137 then says SIGKILL, not out of memory)
_PROBE_KILLED = ("Liveness probe failed", "failed liveness probe", "Startup probe failed", "failed startup probe")
# pydantic's refusal of vLLM's scheduler settings, whose detail a wrapper may cut off
SCHEDULER_REFUSED = "validation error for SchedulerConfig"
_SERVER_UP = ("Application startup complete", "Uvicorn running on", "Starting vLLM API server", "Avg prompt throughput")
STARTUP_FAILED = ("EngineCore failed to start", "Engine core initialization failed", "WorkerProc failed to start")
# v0 turning chunked prefill off after the step budget was chosen for it (0.7 for MLA models, the CPU backend)
_CHUNKED_PREFILL_OFF = ("forcing chunked prefill", "Chunked prefill is not supported on CPU")
# a benchmark of random prompts, which share no prefix
_RANDOM_PROMPTS = re.compile(r"""dataset[-_]name['"]?\s*[=:]?\s*['"]?random\b""")


Readers = tuple[Callable[[str, dict], None], ...]


def facts_in(line: str, readers: Readers | None = None) -> dict:
    """Every fact `line` states, read by `readers` (fact_readers of its shape), or by those of the line itself."""
    facts = {}
    for reader in fact_readers(line) if readers is None else readers:
        reader(line, facts)
    return facts


def fact_readers(shape: str) -> Readers:
    """What can read a fact in lines of this shape. The regexes are digit-blind (shapes.py) and a number converts
    whatever its digits, so a line states the facts its shape does, at the same places."""
    readers = []
    if _read_model(shape, {}) is not None:
        readers.append(_read_model)
    if "-gpu-memory-utilization" in shape and _SUGGESTED_UTILIZATION.search(shape):
        readers.append(_read_suggestion)
    if flags := _flags(shape):
        readers.append(partial(_set, flags))
    if answer_cut(shape):
        readers.append(_read_cut)
    if client := clients.shown(shape):
        readers.append(partial(_read_client, client.name))
    return tuple(readers)


def told(regex: re.Pattern, gates: tuple[str, ...], shape: str, lower: str) -> bool:
    """Whether prose `regex` matches, looked for only where one of its gates (lowercase) is: a long alternation of
    words is slow to try at every place of every shape."""
    return any(gate in lower for gate in gates) and regex.search(shape) is not None


def _flags(shape: str) -> dict:
    """Facts a line states by what it says, not by a number."""
    flags, lower = {}, shape.lower()
    if any(marker in shape for marker in _SERVER_UP):
        flags["server_up"] = True
    if any(marker in shape for marker in STARTUP_FAILED):
        flags["startup_failed"] = True
    if SCHEDULER_REFUSED in shape:
        flags["scheduler_refused"] = True
    if any(marker in shape for marker in _PROBE_KILLED):
        flags["probe_killed"] = True
    if told(_SERVING_TOLD, _SERVING_GATES, shape, lower):
        flags["serving_told"] = True
    if _UNIFIED.search(shape):
        flags["unified_memory"] = True
    if any(marker in shape for marker in _CACHE_CHECK):
        flags["cache_check_failed"] = True
    if _ACCEPTED.search(shape):
        flags["request_accepted"] = True
    if "priority" in shape and ("reempt" in shape or "policy" in shape):
        flags["priority_scheduling"] = True
    if "dataset" in shape and _RANDOM_PROMPTS.search(shape):
        flags["random_prompts"] = True
    if told(_UNLIMITED, _UNLIMITED_GATES, shape, lower):
        flags["unlimited_told"] = True
    if any(marker in shape for marker in _CHUNKED_PREFILL_OFF):
        flags.update(enable_chunked_prefill=False, chunked_prefill_forced_off=True)
    return flags


def _set(flags: dict, line: str, facts: dict) -> None:
    facts.update(flags)


def read_line(name: str, line: str, facts: dict) -> None:
    facts[name] = line


def _read_cut(line: str, facts: dict) -> None:
    facts["cut_told"] = line


def _read_client(name: str, line: str, facts: dict) -> None:
    facts["client"], facts["client_line"] = name, line


def _read_model(line: str, facts: dict) -> bool | None:
    """The model, the version and the GPU the line names; None where it names none."""
    found = None
    if match := _GPU_NAME.search(line):
        facts["gpu_name"], found = match.group(0), True
    if ("model" in line or "serve" in line or "vllm-openai:" in line) and (match := _MODEL.search(line)):
        facts["model"], found = match.group(1), True
    if "version" in line and (match := _VERSION.search(line)):
        facts["version"], found = match.group(1), True
    return found


def _read_suggestion(line: str, facts: dict) -> None:
    if match := _SUGGESTED_UTILIZATION.search(line):
        _convert_into(facts, "suggested_gpu_memory_utilization", match.group(1))


def _convert_into(facts: dict, name: str, text: str) -> None:
    try:
        facts[name] = float(text)
    except ValueError:
        pass
