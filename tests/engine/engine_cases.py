"""Helpers shared by the engine tests."""

import torch


def prompts_of(lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, 256, (n,), generator=generator).tolist() for n in lengths]
