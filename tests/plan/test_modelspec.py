"""Model facts from the catalog, config.json files, model folders and the SmolLM2 GGUF."""

import json

import pytest

from kvtool.engine.discovery.models import resolve_model_path, resolve_model_spec
from kvtool.engine.sizing import catalog
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.spec import spec_from_hf_config
from kvtool.errors import UsageError

SMOLLM2_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 30,
    "hidden_size": 576,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def test_catalog_has_30_models_that_all_parse():
    entries = catalog.entries()
    assert len(entries) >= 30
    for entry in entries:
        spec = entry.spec()
        assert spec.num_parameters > 0 and spec.derived_max_model_len > 0, entry.id
        assert len(spec.layer_types) == spec.num_hidden_layers, entry.id


@pytest.mark.parametrize(
    "name",
    [
        "meta-llama/llama-3.1-8b-instruct",
        "Llama-3.1-8B-Instruct",
        "llama3.1-8b",
        "meta-llama/Meta-Llama-3.1-8B-Instruct",
    ],
)
def test_catalog_matches_ids_in_any_case_and_aliases(name):
    assert resolve_model_spec(name).name == "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(
    "typo,first",
    [
        ("llama-3.1-8b-instrct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llama-3-8b-instrct", "meta-llama/Meta-Llama-3-8B-Instruct"),
        ("qwen3-32", "Qwen/Qwen3-32B"),
    ],
)
def test_unknown_model_suggests_close_names_with_its_numbers_first(typo, first):
    with pytest.raises(UsageError, match=f"unknown model '{typo}'. Did you mean {first}, "):
        resolve_model_spec(typo)


def test_model_folder_read_end_to_end(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2_CONFIG))
    spec = resolve_model_spec(str(tmp_path))
    assert (spec.num_hidden_layers, spec.num_key_value_heads, spec.head_dim) == (30, 3, 64)
    assert spec.source == str(tmp_path / "config.json")
    assert KVCacheSpec(spec).bytes_per_token == 30 * 2 * 3 * 64 * 2


def test_text_config_nesting_and_quantization():
    config = {
        "model_type": "llava",
        "torch_dtype": "float16",
        "quantization_config": {"quant_method": "awq"},
        "text_config": {**SMOLLM2_CONFIG, "torch_dtype": None},
    }
    spec = spec_from_hf_config(config, "nested")
    assert spec.num_hidden_layers == 30 and spec.dtype == "float16" and spec.quantization == "awq"


def test_derived_max_model_len_follows_vllm():
    base = {**SMOLLM2_CONFIG, "max_position_embeddings": 4096}
    assert (
        spec_from_hf_config({**base, "rope_scaling": {"type": "linear", "factor": 4.0}}).derived_max_model_len == 16384
    )
    assert (
        spec_from_hf_config({**base, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}).derived_max_model_len
        == 4096
    )
    assert spec_from_hf_config({**base, "seq_length": 2048}).derived_max_model_len == 2048
    assert spec_from_hf_config({**base, "model_max_length": 9000}).derived_max_model_len == 9000
    no_keys = {k: v for k, v in base.items() if k != "max_position_embeddings"}
    assert spec_from_hf_config(no_keys).derived_max_model_len == 2048


def test_hybrid_mamba_pattern():
    config = {**SMOLLM2_CONFIG, "num_hidden_layers": 4, "hybrid_override_pattern": "M-M*-M-M*-"}
    spec = spec_from_hf_config(config)
    # every letter is a layer (vLLM splits pipeline stages over all of them); only M and * hold state or KV
    assert spec.layer_types == ("mamba", "mlp", "mamba", "full_attention", "mlp") * 2


def test_malformed_config_json_is_a_usage_error(tmp_path):
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 30,')
    with pytest.raises(UsageError, match="not valid JSON"):
        resolve_model_spec(str(tmp_path / "config.json"))
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 30}')
    with pytest.raises(UsageError, match="bad architecture field"):
        resolve_model_spec(str(tmp_path))


def test_unreadable_gguf_is_a_usage_error(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(UsageError, match="cannot read GGUF file"):
        resolve_model_spec(str(bad))


def test_smollm2_alias_resolves_to_the_shipped_gguf():
    path = resolve_model_path("smollm2")
    assert path is not None and path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert resolve_model_spec("smollm2").source == str(path)


def test_smollm2_gguf_read_end_to_end():
    spec = resolve_model_spec(str(resolve_model_path("smollm2")))
    entry = catalog.find("smollm2").spec()
    for field in (
        "model_type",
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "intermediate_size",
        "derived_max_model_len",
        "tie_word_embeddings",
    ):
        assert getattr(spec, field) == getattr(entry, field), field
    assert spec.quantization == "gguf"
    assert 134_000_000 < spec.num_parameters < 135_000_000  # tensor element counts of the file
