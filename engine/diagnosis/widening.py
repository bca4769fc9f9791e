"""The stretches of a chunk around its hits: overlapping ones merged, each widened by its neighbours (a
wrapped message has its numbers on other lines than its anchor)."""

import operator
from itertools import repeat

NEIGHBOURS, NEIGHBOUR_BYTES = 12, 3 << 10  # lines (and at most this many bytes) kept on each side of a hit


def merged(spans: list[tuple[int, int, bool]], chunk: bytes) -> list[tuple[int, int]]:
    """Overlapping or adjacent stretches as one, each widened by its neighbours once (hits are often dense).
    A widening is walked only as far as it decides something: the walks are monotonic, so where the next
    stretch starts within one, the next one's widening reaches at least as far. A widening reaches back over
    a stretch that is not widened (a sign of serving), not only up to it."""
    groups: list[list] = []
    for start, end, widen in spans:
        if groups and start <= groups[-1][1] + 1:
            groups[-1][1], groups[-1][2] = max(end, groups[-1][1]), groups[-1][2] or widen
        else:
            groups.append([start, end, widen])
    out: list[list[int]] = []
    reach = None  # the widening of out[-1]'s end, while not walked to its end
    widened = -1  # the index in out of the last stretch that holds a widened hit
    for start, end, widen in groups:
        if reach is not None:
            out[-1][1] = max(out[-1][1], reach.walk(chunk, start - 1))
        if widen and not (out and start <= out[-1][1] + 1):
            start = _reach_back(chunk, start, out[widened][1] + 1 if widened >= 0 else 0)
            while out and start <= out[-1][1] + 1:  # stretches it reached back over (signs of serving) join it
                start, end = min(start, out[-1][0]), max(end, out.pop()[1])
        if out and start <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:  # any earlier widening has been walked to its end
            out.append([start, end])
            reach = None
        if widen:
            reach, widened = _Reach(chunk, end), len(out) - 1
    if reach is not None:
        out[-1][1] = max(out[-1][1], reach.walk(chunk, len(chunk)))
    return [(start, end) for start, end in out]


def _reach_back(chunk: bytes, start: int, stop: int) -> int:
    """`start` moved back by NEIGHBOURS lines (at most NEIGHBOUR_BYTES), or less once at or before `stop`."""
    low = max(0, start - NEIGHBOUR_BYTES)
    for _ in range(NEIGHBOURS):
        if start <= low or start <= stop:
            break
        start = chunk.rfind(b"\n", low, start - 1) + 1 or low
    return start


class _Reach:
    """An end moved on by NEIGHBOURS lines (at most NEIGHBOUR_BYTES), walked as far as asked."""

    def __init__(self, chunk: bytes, end: int):
        self.end, self.steps, self.limit = end, NEIGHBOURS, min(len(chunk), end + NEIGHBOUR_BYTES)

    def walk(self, chunk: bytes, stop: int) -> int:
        """How far it reaches, walked on until at or past `stop` or to its end."""
        target = min(self.limit, stop)
        if self.steps and self.end < target and (passed := chunk.count(b"\n", self.end + 1, target)) < self.steps:
            found = chunk.find(b"\n", target, self.limit)  # the line breaks passed, then the one at or after `stop`
            self.end, self.steps = self.limit if found < 0 else found, self.steps - passed - 1
        while self.steps and self.end < target:
            found = chunk.find(b"\n", self.end + 1, self.limit)
            self.end = self.limit if found < 0 else found
            self.steps -= 1
        return self.end


def keeps_every_line(spans: set, chunk: bytes) -> bool:
    """Whether the stretches of a chunk with no long line surely keep all of it, as `merged` would say (in C):
    the lines before the first widened one follow on from the chunk's start, that one's widening reaches back
    to them, and each widened line's widening reaches the next widened line (or the chunk's end): fewer than
    NEIGHBOURS line breaks and NEIGHBOUR_BYTES on. A line that is not widened widens no gap next to it."""
    starts = sorted(start for start, _, widen in spans if widen)  # whole lines: their ends in the same order
    if not starts:
        return False
    reached = 0  # the lines from the chunk's start that signs of serving keep, one after the other
    for start, end, _ in sorted(span for span in spans if not span[2] and span[0] < starts[0]):
        if start != reached:
            break
        reached = end + 1
    if starts[0] > reached and not (
        starts[0] - reached <= NEIGHBOUR_BYTES and chunk.count(b"\n", reached, starts[0] - 1) < NEIGHBOURS
    ):
        return False
    after = [end + 1 for end in sorted(end for _, end, widen in spans if widen)]
    before = [start - 1 for start in starts[1:]] + [len(chunk)]
    return (
        max(map(operator.sub, before, after)) < NEIGHBOUR_BYTES
        and max(map(chunk.count, repeat(b"\n"), after, before)) < NEIGHBOURS
    )
