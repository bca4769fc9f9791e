"""schemathesis hooks for tests/server/test_openapi_schema.py: keep generated requests cheap on a CPU engine.

`before_call` runs for the cases of every phase (coverage included), after generation: it lowers max_tokens and n
that are within their valid range, and leaves out-of-range values alone so that they are still refused.
"""

import schemathesis

MAX_TOKENS_CAP = 2
N_CAP = 2
MAX_MODEL_LEN = 512  # tests/conftest.py KVTOOL_SERVER_ARGS
MAX_N = 128
# route -> the field a request that sets none gets capped
GENERATING = {
    "/v1/completions": "max_tokens",
    "/v1/chat/completions": "max_tokens",
    "/v1/responses": "max_output_tokens",
}


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if not isinstance(body, dict) or context.operation.path not in GENERATING:
        return
    # chat's and the Responses API's default is the whole context, completions' 16
    body.setdefault(GENERATING[context.operation.path], MAX_TOKENS_CAP)
    for field, valid_max, cap in (
        ("max_tokens", MAX_MODEL_LEN, MAX_TOKENS_CAP),
        ("max_completion_tokens", MAX_MODEL_LEN, MAX_TOKENS_CAP),
        ("max_output_tokens", 2**63, MAX_TOKENS_CAP),  # lowered to the context, never refused for its size
        ("n", MAX_N, N_CAP),
    ):
        value = body.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= valid_max:
            body[field] = min(value, cap)
