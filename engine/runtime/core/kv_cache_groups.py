"""KV cache groups (vLLM's hybrid allocator): layers that attend alike share one block table.

Full-attention layers need every block of a sequence; a sliding-window layer only the blocks that
still hold one of its last `window` tokens. Layers are grouped by kind into groups of equal size
(`group_size` = the greatest common divisor of the kinds' layer counts, so no group is padded);
each sequence holds one block table per group. Every block id of the shared pool owns one page in
each of `group_size` cache tensors, and layer i of every group uses tensor i, so the groups share
memory without ever sharing a block.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class KVCacheGroup:
    layer_ids: tuple[int, ...]
    sliding_window: int | None  # None: full attention


@dataclass(frozen=True)
class KVCacheLayout:
    groups: tuple[KVCacheGroup, ...]

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    @property
    def group_size(self) -> int:
        return len(self.groups[0].layer_ids)

    @property
    def sliding_windows(self) -> tuple[int | None, ...]:
        return tuple(group.sliding_window for group in self.groups)

    def placement(self, layer_id: int) -> tuple[int, int]:
        """(group, tensor) of a layer: its block table and the cache tensor it reads through it."""
        for g, group in enumerate(self.groups):
            if layer_id in group.layer_ids:
                return g, group.layer_ids.index(layer_id)
        raise KeyError(layer_id)


def kv_cache_layout(layer_windows: list[int | None]) -> KVCacheLayout:
    """Group layers by their window (None for full attention), in layer order within each kind."""
    kinds: dict[int | None, list[int]] = {}
    for layer_id, window in enumerate(layer_windows):
        kinds.setdefault(window, []).append(layer_id)
    size = math.gcd(*(len(layers) for layers in kinds.values()))
    groups = [
        KVCacheGroup(tuple(layers[i : i + size]), window)
        for window, layers in kinds.items()
        for i in range(0, len(layers), size)
    ]
    return KVCacheLayout(tuple(groups))
