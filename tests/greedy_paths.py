"""Greedy answers computed along different paths: a prefill or a decode step, alone or batched, with or
without a prefix-cache hit. Each path sums in its own order, so their logprobs agree within float32 rounding,
not bit for bit, and where the best two tokens of a step are that close, either may come first."""

ROUNDING = 1e-3  # logprob; SmolLM2's float32 paths differ by about 1e-5


def assert_same_greedy_tokens(tokens: list, expected: list, expected_top: list[dict]) -> None:
    """`tokens` are `expected`, up to a step where the expected answer's best two candidates are within
    rounding of each other and `tokens` took the other one (from there on the answers may part)."""
    for step, (token, wanted) in enumerate(zip(tokens, expected)):
        if token != wanted:
            top = expected_top[step]
            assert token in top and top[wanted] - top[token] <= ROUNDING, (step, tokens, expected, top)
            return
    assert len(tokens) == len(expected)
