"""The words that say an answer was cut short (a finish_reason of "length", or prose in nine languages), and
the substrings a line must hold before those regexes are tried."""

import re

_FINISH_LENGTH = r"""finish_reason['"]?\s*[:=]\s*['"]?length\b"""
CUT_PROSE = re.compile(
    r"""\btruncated\b|\bcut (?:off|short|in (?:the )?(?:middle|half)|mid-?(?:sentence|word|way))\b"""
    r"|\bincomplete\b|截断|不完整"
    r"|\b(?:only|just) (?:\w+ )?(?:\d+|a few|a couple of) (?:words|tokens)\b"
    r"|\bcropped\b|\bchopped off\b|\bends? abruptly\b|\bstops? (?:mid-?sentence|in the middle)|输出不全|只输出了?"
    # Japanese, Korean, Spanish, Portuguese, German, Russian, French
    r"|途中で(?:切れ|途切れ|止ま|終わ)|切れて(?:しま|い)|途切れ|打ち切ら|잘려|잘림|끊겨|끊김|중간에 (?:끊|멈)"
    r"|\b(?:se )?cortan?\b|\bcortad[ao]s?\b|\btruncad[ao]s?\b|\bincomplet[ao]s?\b|\ba medias\b|pela metade"
    r"|\babgeschnitten\b|\bunvollständig|mitten im Satz|обрез\w+|обрыва\w+|оборва\w+|не до конца|неполн\w+"
    r"|\bcoupée?s?\b|\btronquée?s?\b|\bincomplètes?\b"
    # an answer that just stops: "the chain-of-thought just stops", "hört einfach auf", "se detiene a la mitad"
    r"|\b(?:just|simply) stops\b|\bstops? (?:early|short|abruptly)\b|hört (?:einfach |mittendrin )?auf|bricht \w+ ab"
    r"|\bse (?:detiene|corta) a (?:la )?mitad|\bpara no meio|戛然而止|说到一半|停在一半|(?:中间|中途)就?停"
    r"|그냥 멈|途中で止ま"
    # a long answer that comes back a paragraph or a sentence long
    r"|\b(?:only|just) (?:a|one) (?:paragraph|sentence|line)\b|只有一段|한 문단(?:뿐|밖에)"
    r"|\bnur (?:einen|ein) (?:Absatz|Satz)|\bsolo (?:un|una) (?:párrafo|frase)|\bapenas um parágrafo"
    # an answer that ends mid-sentence, or is always about the same length: "always about 190 words", "a paragraph and
    # a half", "siempre unas 190 palabras", "всегда около 190 слов", "总是 190 字左右"
    r"|\bmid-?sentence\b|\ba paragraph and a half\b"
    r"|\b(?:always|every time|each time|consistently) (?:about|around|roughly|~)\s?\d+ (?:words|tokens)\b"
    r"|\bsiempre (?:unas|alrededor de|más o menos) \d+ (?:palabras|tokens)"
    r"|\bвсегда (?:около|примерно|где-то) \d+ (?:слов|токенов)"
    r"|总是\s?\d+\s?(?:字|个词|个 ?token)左右",
    re.IGNORECASE,
)
CUT_SHORT = re.compile(_FINISH_LENGTH + "|" + CUT_PROSE.pattern, re.IGNORECASE)
# what is cut: an answer, not a prompt or a context (a line must name one beside its words of a cut)
ANSWER = re.compile(
    r"answer|response|output|repl(?:y|ies)|completion|generat|\btext|summar|essay|trace|reasoning|translat|\bcode\b"
    r"|chain[- ]of[- ]thought|\bCoT\b|\bthinking\b|思考|생각|razonamiento|размышлени\w*"
    r"|\bstor(?:y|ies)\b|\barticles?\b|Gedankenkette|Zusammenfassung|思维链|推理过程"
    r"|回答|答案|输出|回复|出力|応答|답변|응답|출력|respuesta|salida|Antwort|Ausgabe|ответ|вывод|resposta|saída|réponse",
    re.IGNORECASE,
)


def answer_cut(line: str) -> bool:
    """Whether the line says in words that an answer was cut short (in any of the languages of CUT_PROSE)."""
    lower = line.lower()
    if not any(gate in lower for gate in _PROSE_GATES):
        return False
    return bool(CUT_PROSE.search(line) and ANSWER.search(line))


# substrings every line a regex can match holds (the regexes ignore case, and none has a literal to start from)
CUT_SHORT_GATES = (  # the prose, for the reader
    "runcat", "ut off", "ut short", "ncomplete", "ropped", "hopped", "bruptly", "id-sentence", "iddle",
    "截断", "不完整", "输出不全", "只输出", "途中で", "切れて", "途切れ", "打ち切",
    "잘려", "잘림", "끊겨", "끊김", "중간에",
    "corta", "cortad", "runcad", "ncomplet", "medias", "metade", "abgeschnitten", "nvollständig", "im Satz", "обрез",
    "обрыва", "оборва", "до конца", "неполн", "oupé", "ronqué", "ncomplè", "stops", "stop early", "stop short",
    "hört", "bricht", "mitad", "no meio", "戛然", "一半", "中间", "中途", "멈", "止ま", "a paragraph", "one paragraph",
    "a sentence",
    "one sentence", "a line", "one line", "只有一段", "한 문단", "nur ein", "solo un", "apenas um", "id-sentence",
    "idsentence", "and a half", "always", "every time", "each time", "consistently", "siempre", "всегда", "总是",
)  # fmt: skip
CUT_GATES = (*CUT_SHORT_GATES, "inish_reason", "nly ", "ust ")
_PROSE_GATES = tuple(gate.lower() for gate in (*CUT_SHORT_GATES, "nly ", "ust ", "cut ", "stop", "ends"))
