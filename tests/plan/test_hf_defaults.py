"""The defaults transformers fills into nested configs, as plan fills them without importing transformers."""

import json

import pytest

from kvtool.engine.sizing.hf_defaults import MODEL_TYPE_DEFAULTS, NESTED_MODEL_TYPES
from kvtool.engine.sizing.spec import spec_from_config_file, spec_from_hf_config

LLAVA = "tests/plan/startup_logs/configs/llava-hf__llava-1.5-7b-hf/config.json"


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPE_DEFAULTS))
def test_the_table_is_transformers_own_defaults(model_type):
    transformers = pytest.importorskip("transformers")
    config = transformers.CONFIG_MAPPING[model_type]().to_dict()
    assert {key: config[key] for key in MODEL_TYPE_DEFAULTS[model_type]} == MODEL_TYPE_DEFAULTS[model_type]


@pytest.mark.parametrize("parent", sorted(NESTED_MODEL_TYPES))
def test_a_nested_dict_without_a_model_type_becomes_the_parents_default(parent):
    transformers = pytest.importorskip("transformers")
    config = transformers.CONFIG_MAPPING[parent]()
    for key, model_type in NESTED_MODEL_TYPES[parent].items():
        assert getattr(config, key).model_type == model_type


def test_llava_text_config_left_to_llamas_defaults():
    # the LLaVA-1.5 config keeps only vocab_size and max_position_embeddings in its text_config
    assert "hidden_size" not in json.load(open(LLAVA))["text_config"]
    spec = spec_from_config_file(LLAVA)
    assert (spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads, spec.num_key_value_heads) == (
        32,
        4096,
        32,
        32,
    )
    assert (spec.vocab_size, spec.max_position_embeddings, spec.intermediate_size) == (32064, 4096, 11008)
    assert spec.mm_tokens_per_item == (336 // 14) ** 2  # the CLIP tower's own fields stay as given


def test_explicit_nested_fields_win_and_unknown_types_are_left_alone():
    config = {"model_type": "llava", "text_config": {"hidden_size": 2048, "num_attention_heads": 16}}
    spec = spec_from_hf_config(config, "m")
    assert (spec.hidden_size, spec.num_hidden_layers) == (2048, 32)
    with pytest.raises(Exception, match="missing or has a bad architecture field"):
        spec_from_hf_config({"model_type": "someone_elses", "text_config": {"hidden_size": 2048}}, "m")


def test_a_top_level_config_gets_its_model_type_s_defaults_and_keeps_an_explicit_null():
    # gemma-2-9b-it's config leaves tie_word_embeddings to Gemma2Config (True): one 256,000 x 3,584 matrix, not two
    gemma2 = spec_from_config_file("tests/plan/startup_logs/configs/google__gemma-2-9b-it/config.json")
    assert gemma2.tie_word_embeddings
    mistral = spec_from_hf_config({"model_type": "mistral", "sliding_window": None, "num_hidden_layers": 2})
    assert mistral.sliding_window is None and mistral.num_key_value_heads == 8
