"""`kvtool plan` on models it has never seen, read from a Hub stand-in on 127.0.0.1 through HF_ENDPOINT,
then offline from the cache."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from hub_stand_in import HubStandIn, safetensors_file
from typer.testing import CliRunner

from kvtool.cli.app import app

runner = CliRunner()
HIDDEN, LAYERS, HEADS, KV_HEADS, INTERMEDIATE, VOCAB = 256, 4, 4, 2, 512, 1000
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": LAYERS,
    "hidden_size": HIDDEN,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "intermediate_size": INTERMEDIATE,
    "vocab_size": VOCAB,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
KV = KV_HEADS * HIDDEN // HEADS  # 128: k and v projections


def llama_tensors(linear: str = "BF16", scales: bool = False) -> dict:
    tensors = {
        "model.embed_tokens.weight": ("BF16", [VOCAB, HIDDEN]),
        "lm_head.weight": ("BF16", [VOCAB, HIDDEN]),
        "model.norm.weight": ("BF16", [HIDDEN]),
    }
    shapes = {
        "q_proj": [HIDDEN, HIDDEN],
        "k_proj": [KV, HIDDEN],
        "v_proj": [KV, HIDDEN],
        "o_proj": [HIDDEN, HIDDEN],
        "gate_proj": [INTERMEDIATE, HIDDEN],
        "up_proj": [INTERMEDIATE, HIDDEN],
        "down_proj": [HIDDEN, INTERMEDIATE],
    }
    for layer in range(LAYERS):
        tensors[f"model.layers.{layer}.input_layernorm.weight"] = ("BF16", [HIDDEN])
        tensors[f"model.layers.{layer}.post_attention_layernorm.weight"] = ("BF16", [HIDDEN])
        for name, shape in shapes.items():
            tensors[f"model.layers.{layer}.{name}.weight"] = (linear, shape)
            if scales:
                tensors[f"model.layers.{layer}.{name}.weight_scale"] = ("F32", [1])
    return tensors


# By hand: embeddings and lm_head 2 x 1000 x 256; per layer q, o 256 x 256, k, v 128 x 256,
# gate, up, down 3 x 512 x 256, two norms of 256; one final norm of 256.
LINEAR_PER_LAYER = 2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256  # 589,824
NORMS = LAYERS * 2 * 256 + 256  # 2,304
EMBEDDINGS = 2 * 1000 * 256  # 512,000
BF16_PARAMETERS = EMBEDDINGS + LAYERS * LINEAR_PER_LAYER + NORMS  # 2,873,600
FP8_BYTES = (EMBEDDINGS + NORMS) * 2 + LAYERS * LINEAR_PER_LAYER * 1 + LAYERS * 7 * 4  # fp32 per-tensor scales


@pytest.fixture
def hub(tmp_path, monkeypatch):
    fp8_config = {**CONFIG, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    stand_in = HubStandIn(
        {
            "some-org/some-model": {
                "config.json": json.dumps(CONFIG).encode(),
                "model.safetensors": safetensors_file(llama_tensors()),
            },
            "some-org/some-model-fp8": {
                "config.json": json.dumps(fp8_config).encode(),
                "model.safetensors": safetensors_file(llama_tensors("F8_E4M3", scales=True)),
            },
            "some-org/gated-model": {"config.json": json.dumps(CONFIG).encode()},
            "some-org/no-config": {"README.md": b"hello"},
        },
        gated={"some-org/gated-model": "hf_secret"},
    )
    for name, value in (
        ("HF_ENDPOINT", stand_in.url),
        ("HF_HOME", str(tmp_path / "hf")),
        ("KVTOOL_CACHE_DIR", str(tmp_path / "kvtool")),
    ):
        monkeypatch.setenv(name, value)
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    yield stand_in
    stand_in.close()


def plan(*args: str) -> tuple[int, dict | str]:
    result = runner.invoke(app, ["plan", "--gpu-mem", "8GiB", *args])
    return result.exit_code, json.loads(result.stdout) if "--json" in args and result.exit_code < 2 else result.stderr


def test_an_unseen_model_is_planned_from_the_hub_with_exact_weight_bytes(hub):
    code, report = plan("--model", "some-org/some-model", "--json")
    assert code == 0, report
    assert report["model"]["num_parameters"] == BF16_PARAMETERS  # counted from the safetensors header
    assert report["memory"]["weights_bytes"] == BF16_PARAMETERS * 2
    assert report["kv_bytes_per_token"] == LAYERS * 2 * KV_HEADS * 64 * 2
    assert report["model"]["source"].startswith("hub:some-org/some-model@")
    assert ("GET", "/some-org/some-model/resolve/main/config.json") in hub.requests or any(
        path.endswith("/config.json") for _, path in hub.requests
    )


def test_fp8_checkpoint_weights_are_its_stored_bytes(hub):
    code, report = plan("--model", "some-org/some-model-fp8", "--json")
    assert code == 0, report
    assert report["memory"]["weights_bytes"] == FP8_BYTES
    assert report["model"]["quantization"] == "fp8"


def test_offline_answers_from_the_cache_and_then_from_the_hf_cache_alone(hub, tmp_path, monkeypatch):
    code, online = plan("--model", "some-org/some-model", "--json")
    hub.close()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, offline = plan("--model", "some-org/some-model", "--json")
    assert code == 0 and offline == online
    shutil.rmtree(tmp_path / "kvtool")  # kvtool's facts gone: config.json from the HF cache, weights from the shapes
    code, from_hf_cache = plan("--model", "some-org/some-model", "--json")
    assert code == 0 and from_hf_cache["kv_bytes_per_token"] == online["kv_bytes_per_token"]
    assert from_hf_cache["model"]["num_parameters"] == EMBEDDINGS + LAYERS * LINEAR_PER_LAYER  # norms not in shapes
    code, error = plan("--model", "some-org/never-fetched")
    assert code == 2 and "not in the Hugging Face cache and HF_HUB_OFFLINE is set" in error


@pytest.mark.parametrize(
    "model, problem",
    [
        ("some-org/gated-model", "'some-org/gated-model' is gated on http://127.0.0.1"),
        ("some-org/missing-model", "unknown model 'some-org/missing-model': not in the catalog and not found on"),
        ("some-org/no-config", "has no config.json"),
    ],
)
def test_gated_missing_and_config_less_repos_are_one_line_exit_2(hub, model, problem):
    code, error = plan("--model", model)
    assert code == 2 and problem in error and len(error.strip().splitlines()) == 1


def test_hf_token_opens_a_gated_repo(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    code, report = plan("--model", "some-org/gated-model", "--json")
    assert code == 0 and report["kv_bytes_per_token"] == LAYERS * 2 * KV_HEADS * 64 * 2


def test_no_network_is_one_line_exit_2(hub, monkeypatch):
    hub.close()
    code, error = plan("--model", "some-org/some-model")
    assert code == 2 and "cannot reach http://127.0.0.1" in error and len(error.strip().splitlines()) == 1


PROBE = """
import sys
import time
from kvtool.cli.app import app
try:
    app(["plan", "--model", "some-org/some-model", "--gpu-mem", "8GiB", "--json"])
except SystemExit:
    pass
print("HEAVY", sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""


def test_the_cli_with_hf_endpoint_then_offline_imports_neither_torch_nor_transformers(hub):
    online = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=os.environ)
    assert '"fits": true' in online.stdout and "HEAVY []" in online.stdout, online.stderr
    hub.close()
    offline = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert offline.stdout == online.stdout
    assert "huggingface_hub" not in offline.stdout


def test_cached_facts_answer_without_the_hub_for_a_day_then_the_revision_is_checked(hub, tmp_path):
    code, first = plan("--model", "some-org/some-model", "--json")
    asked = len(hub.requests)
    code, again = plan("--model", "some-org/some-model", "--json")
    assert code == 0 and again == first and len(hub.requests) == asked  # no request at all
    (facts,) = (tmp_path / "kvtool" / "hub").rglob("some-org--some-model.json")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(facts, (two_days_ago, two_days_ago))
    code, stale = plan("--model", "some-org/some-model", "--json")
    assert code == 0 and stale == first
    assert any(path.endswith("/config.json") for _, path in hub.requests[asked:])  # the revision asked again
    assert facts.stat().st_mtime > two_days_ago + 24 * 3600  # and the facts are fresh for another day
