"""The anchors the reader looks for in a large log (reader.py): every line that can matter holds an anchor and,
where refinements are listed, one of them too (a refinement starts with its anchor; a space in it matches any
whitespace, a wrapped line's break too). The reader decodes those lines and their neighbours. Each recogniser's gate
passes this filter (a test checks it), and so do the lines context.py and stage.py read."""

import re

from kvtool.engine.diagnosis import cut_words, errors
from kvtool.engine.diagnosis.reader import WRAP

ANCHORS = {
    # a traceback's frames first: in a log dense with errors they alone keep every line (reader.py stops there)
    b'File "': (),
    b"max": (b"max seq len", b"max model len", b"max_model_len", b"max_tokens must", b"max_tokens=16",
             b"max_num_batched_tokens (", b"max_num_scheduled_tokens is"),
    b"aximum": (), b"emory": (), b"allocate": (), b"blocks": (), b"reempt": (), b"odel": (),
    b"too": re.compile(rb"too" + WRAP + rb"long"), b"serve": (),
    b"usage:": re.compile(rb"usage:" + WRAP + rb"(?:[7-9]\d|100)\."),  # a KV cache 70 % full or fuller
    b"cache size": (), b"_cache_usage_perc": (), b"completion_tokens": (), b"prompt_tokens": (), b"finish_reason": (),
    b"_OUT_OF_MEMORY": (), b"_ALLOC_FAILED": (), b"RESOURCE_EXHAUSTED": (),  # CUDA's, cuBLAS's and XLA's status names
    b"template": (), b"tool choice": (), b"startup complete": (), b"apturing": (),
    b"SamplingParams(": re.compile(rb"SamplingParams\((?![^)\n]*max_tokens)"),  # offline code, not request logs
    b"fatal error": (), b"Core failed": (), b"core initialization": (),  # stage.py's markers
    b"hunked prefill": (),
    b"LLM Version": (), b"device_name=": (),  # the release (collect_env) and the GPU, for the start-up reader
    **errors.ANCHORS,  # error lines, alone
    # signs that the server was serving: the first in each chunk is enough
    b"POST /v1/": None, b"Received request": None, b"Added request": None,
}  # fmt: skip
# What people write rather than what a server prints (answers said to be cut short, cut_words.py): looked for in
# the first chunk only, since a paste is smaller and a larger input is a machine's log.
PROSE_ANCHORS = {gate.encode(): () for gate in cut_words.CUT_SHORT_GATES}
