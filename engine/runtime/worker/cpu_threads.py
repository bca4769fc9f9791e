"""How many threads a CPU step runs with: the CPUs this process may use, less those other work keeps busy.

A step is a few hundred parallel regions, and each waits at its barrier for the slowest thread of the
team. When another process keeps one of our CPUs busy, the thread that shares that CPU gets a time
slice now and then, and every barrier waits for it: two threads beside one busy process decode slower
than one thread alone. So the team follows the CPU time that others take on our CPUs, measured from
/proc/stat (the allowed CPUs' busy time) less this process's own CPU time, over the last interval.

Time that processes niced below this one take (/proc/stat's "nice" field, processes with a nice value above
0) is not counted unless this process is niced itself: the kernel's scheduler gives such a process a
sliver of a CPU that one of our threads wants (about 10 % at nice 10, 1.5 % at nice 19), so it never holds
a barrier up. Beside a nice-19 busy loop and a nice-10 compiler, two threads decoded 1.6x faster than one.
"""

import os
import time

import torch

# the busy fields of a /proc/stat cpuN line (user nice system idle iowait irq softirq steal guest guest_nice);
# steal too: time the hypervisor gave to another machine is not ours either. NICE_FIELD: niced processes.
BUSY_FIELDS = (slice(0, 1), slice(2, 3), slice(5, 8))
NICE_FIELD = slice(1, 2)


class CpuThreads:
    """Call `update()` before each step on the thread that runs the steps; it re-measures every `interval_s`."""

    def __init__(self, cpus: set[int], interval_s: float = 0.5):
        self.cpus, self.interval_s = cpus, interval_s
        self.threads = len(cpus)
        self._last = _sample(cpus)  # (monotonic time, busy seconds of the CPUs, our CPU seconds); None: no /proc/stat

    def update(self) -> int:
        if self._last is None or time.monotonic() - self._last[0] < self.interval_s:
            return self.threads
        now = _sample(self.cpus)
        elapsed, others = now[0] - self._last[0], (now[1] - self._last[1]) - (now[2] - self._last[2])
        self._last = now
        threads = max(1, min(len(self.cpus), int(len(self.cpus) - others / elapsed + 0.5)))
        if threads != self.threads:
            torch.set_num_threads(threads)
            self.threads = threads
        return threads


def _sample(cpus: set[int]) -> tuple[float, float, float] | None:
    """(monotonic time, busy seconds of `cpus`, this process's CPU seconds), or None without /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return None
    own = os.times()
    busy = busy_ticks(lines, cpus, count_nice=os.getpriority(os.PRIO_PROCESS, 0) > 0)
    return time.monotonic(), busy / os.sysconf("SC_CLK_TCK"), own.user + own.system


def busy_ticks(stat_lines: list[str], cpus: set[int], count_nice: bool) -> int:
    """Busy clock ticks of `cpus` in /proc/stat's lines; niced processes' time only with `count_nice`."""
    parts = BUSY_FIELDS + (NICE_FIELD,) if count_nice else BUSY_FIELDS
    busy = 0
    for line in stat_lines:
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            fields = [int(v) for v in rest.split()]
            busy += sum(sum(fields[part]) for part in parts)
    return busy
