"""Structured outputs in the engine: the grammar's bitmask holds at any temperature; each spec compiles once."""

import re

import pytest

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.errors import UsageError


def test_a_regex_holds_for_every_sample_and_compiles_once(smollm2_llm):
    constraint = StructuredOutputsParams(regex=r"(red|green|blue), [0-9]{2}")
    params = SamplingParams(n=4, max_tokens=12, temperature=1.0, seed=0, structured_outputs=constraint)
    compiler = smollm2_llm.engine.grammar_compiler
    compiled_before = compiler.num_compiled
    outputs = smollm2_llm.generate(["Pick a colour and a number:"] * 2, params, use_tqdm=False)
    for completion in (c for output in outputs for c in output.outputs):
        assert re.fullmatch(r"(red|green|blue), [0-9]{2}", completion.text)
        assert completion.finish_reason == "stop"
    assert compiler.num_compiled == compiled_before + 1


def test_exactly_one_constraint_is_required():
    with pytest.raises(UsageError, match="only use one kind"):
        StructuredOutputsParams(regex="a", choice=["b"])
    with pytest.raises(UsageError, match="none are specified"):
        StructuredOutputsParams()


def test_logit_bias_keys_are_token_ids_clamped_to_100():
    assert SamplingParams(logit_bias={"5": 300, 7: -500}).logit_bias == {5: 100.0, 7: -100.0}
    with pytest.raises(UsageError, match="cannot be converted to integer token IDs"):
        SamplingParams(logit_bias={"five": 1})
