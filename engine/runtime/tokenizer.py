"""The HF tokenizer (with its chat template) of a model folder; None for a weights-only config."""

from pathlib import Path


def load_tokenizer(folder: Path):
    """AutoTokenizer from `folder`, or None when the folder has no tokenizer files."""
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def eos_token_ids(tokenizer, hf_config) -> set[int]:
    """Every token id that ends generation: the config's eos ids plus the tokenizer's."""
    ids = getattr(hf_config, "eos_token_id", None)
    ids = set(ids if isinstance(ids, (list, tuple)) else [ids] if ids is not None else [])
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
