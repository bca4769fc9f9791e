"""Helpers shared by the engine tests."""

import torch


def prompts_of(lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, 256, (n,), generator=generator).tolist() for n in lengths]


def hf_greedy(model, prompt_ids, max_new_tokens):
    """HF generate's greedy continuation of one prompt: the reference the engine must equal."""
    ids = torch.tensor([prompt_ids])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    return out[0, len(prompt_ids) :].tolist()
