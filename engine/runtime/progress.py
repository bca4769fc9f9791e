"""The rich progress bar of LLM.generate: requests done and output tokens per second."""

import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class GenerationProgress:
    def __init__(self, total: int, enabled: bool = True):
        self.enabled = enabled
        self.start = time.perf_counter()
        self.num_tokens = 0
        self.progress = Progress(
            TextColumn("Generating"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[speed]}"),
            TimeElapsedColumn(),
            disable=not enabled,
        )
        self.task = self.progress.add_task("generate", total=total, speed="")

    def __enter__(self) -> "GenerationProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def advance(self, finished: list, new_tokens: int) -> None:
        self.num_tokens += new_tokens
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        self.progress.update(self.task, advance=len(finished), speed=f"output {self.num_tokens / elapsed:,.1f} tok/s")
