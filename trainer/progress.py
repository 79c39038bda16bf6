"""What the demo shows while it runs: step, reward, staleness, tokens/s (rich).

On a terminal a live progress bar carries the figures; elsewhere (a pipe, CI,
a test) a plain line is printed every tenth of the run, so logs stay short.
The figures are the ones the trace records as counters, so what a user sees
here is what `flowmap report` will show afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@dataclass(slots=True)
class StepFigures:
    step: int
    reward_mean: float
    staleness_max: int
    tokens_per_s: float
    loss: float
    in_flight: int
    watermark: int
    ready_depth: int


class ProgressDisplay:
    def __init__(self, total_steps: int, live: bool) -> None:
        self.total_steps = total_steps
        self.console = Console()
        self.live = live and self.console.is_terminal
        self.every = max(1, total_steps // 10)
        self._progress: Progress | None = None
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]GRPO[/] step"),
                MofNCompleteColumn(),
                BarColumn(bar_width=12),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                expand=False,
            )
            self._task = self._progress.add_task("warming up", total=total_steps)
            self._progress.start()

    def update(self, f: StepFigures) -> None:
        if self._progress is not None:
            text = (f"reward [green]{f.reward_mean:.2f}[/] staleness {f.staleness_max} "
                    f"{f.tokens_per_s:,.0f} tok/s loss {f.loss:+.3f}")
            if self.console.width >= 120:  # the dispatch figures, when there is room
                text += f" [dim]in-flight {f.in_flight}/{f.watermark} ready {f.ready_depth}[/]"
            self._progress.update(self._task, completed=f.step + 1, description=text)
        elif (f.step + 1) % self.every == 0 or f.step + 1 == self.total_steps:
            self.console.print(
                f"step {f.step + 1:>3}/{self.total_steps}  reward {f.reward_mean:.2f}  "
                f"staleness {f.staleness_max}  {f.tokens_per_s:,.0f} tok/s  loss {f.loss:+.3f}  "
                f"in-flight {f.in_flight}/{f.watermark}  ready {f.ready_depth}",
                highlight=False, soft_wrap=True,
            )

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
