"""Which engine model class serves each HF `model_type` (imported only when a model is built)."""

import importlib

# model_type -> (module under kvtool.engine.runtime.models, class)
MODEL_CLASSES = {
    "llama": ("llama", "LlamaForCausalLM"),
    "mistral": ("llama", "LlamaForCausalLM"),
    "qwen2": ("llama", "LlamaForCausalLM"),
    "phi3": ("llama", "LlamaForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "gemma2": ("gemma", "Gemma2ForCausalLM"),
    "gemma3_text": ("gemma", "Gemma3ForCausalLM"),
    "qwen3_moe": ("moe", "Qwen3MoeForCausalLM"),
    "mixtral": ("moe", "MixtralForCausalLM"),
}
SUPPORTED_MODEL_TYPES = tuple(MODEL_CLASSES)


def model_class(model_type: str):
    module, name = MODEL_CLASSES[model_type]
    return getattr(importlib.import_module(f"kvtool.engine.runtime.models.{module}"), name)
