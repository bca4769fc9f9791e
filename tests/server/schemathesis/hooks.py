"""schemathesis hooks for tests/server/test_openapi_schema.py: keep generated requests cheap on a CPU engine.

`before_call` runs for the cases of every phase (coverage included), after generation: it lowers max_tokens and n
that are within their valid range, and leaves out-of-range values alone so that they are still refused.
"""

import schemathesis

MAX_TOKENS_CAP = 2
N_CAP = 2
MAX_MODEL_LEN = 512  # tests/conftest.py KVTOOL_SERVER_ARGS
MAX_N = 128
GENERATING = ("/v1/completions", "/v1/chat/completions")


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if not isinstance(body, dict) or context.operation.path not in GENERATING:
        return
    body.setdefault("max_tokens", MAX_TOKENS_CAP)  # chat's default is the whole context, completions' 16
    for field, valid_max, cap in (
        ("max_tokens", MAX_MODEL_LEN, MAX_TOKENS_CAP),
        ("max_completion_tokens", MAX_MODEL_LEN, MAX_TOKENS_CAP),
        ("n", MAX_N, N_CAP),
    ):
        value = body.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= valid_max:
            body[field] = min(value, cap)
