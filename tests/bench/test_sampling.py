"""--temperature, --top-p, --top-k and --extra-body as request fields."""

import pytest

from kvtool.bench.client import RequestSpec, build_payload
from kvtool.bench.datasets import SampleRequest
from kvtool.bench.sampling import sampling_fields
from kvtool.errors import UsageError


def payload(**kwargs) -> dict:
    spec = RequestSpec("http://127.0.0.1:1", "completions", "m", sampling=sampling_fields(**kwargs))
    return build_payload(spec, SampleRequest(prompt="hi", max_tokens=4, input_len=1))


def test_greedy_by_default_and_flags_sent_only_when_given():
    assert payload(temperature=0.0, top_p=None, top_k=None, extra_body=None)["temperature"] == 0.0
    sent = payload(temperature=0.7, top_p=0.9, top_k=20, extra_body='{"min_p": 0.05, "top_k": 5}')
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["min_p"]) == (0.7, 0.9, 5, 0.05)
    assert "top_p" not in payload(temperature=0.0, top_p=None, top_k=None, extra_body=None)
    assert sent["max_tokens"] == 4 and sent["stream"] is True


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{min_p: 1}", "not JSON"),
        ("[1]", "must be a JSON object"),
        ('{"max_tokens": 9}', "may not set max_tokens"),
    ],
)
def test_bad_extra_body_is_refused(text, problem):
    with pytest.raises(UsageError, match=problem):
        sampling_fields(0.0, None, None, text)
