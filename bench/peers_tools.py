"""The tools bench_peers.py compares, each as a user runs it over the whole process tree.

- flowmap: `flowmap trace`; its start-up hook follows every Python child.
- memray: `memray run --follow-fork`, which follows `fork()`; the trainer's
  ranks are spawned, so `_peer_boot` starts a `memray.Tracker` in each of them.
- torch.profiler: no command-line runner; `_torch_profile_run.py` wraps the
  driver in `profile(record_shapes=True, profile_memory=True)` and `_peer_boot`
  wraps each spawned rank the same way.
- viztracer: `viztracer`, which follows multiprocessing and subprocess children
  itself and merges them into one file at the end.

Each tool also says how many processes its output covers, so a row that missed
a child shows it instead of looking cheap.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
TORCH_PROFILE = BENCH / "_torch_profile_run.py"
PEER_BOOT = BENCH / "_peer_boot"
SHARD_SUFFIX = ".flowmap.jsonl"


@dataclass(frozen=True)
class Tool:
    key: str  # what --tools names
    label: str  # the table's row
    module: str  # the module that must import for the tool to run
    command: Callable[[list[str], Path], list[str]]
    processes: Callable[[Path], int]  # processes the output in this directory covers
    boot: str | None = None  # FLOWMAP_BENCH_PEER for _peer_boot, when children need it
    warning: Callable[[Path], str | None] = lambda out: None  # a caveat its output shows

    def missing(self) -> str | None:
        """Why the tool cannot run here, or None."""
        try:
            found = importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"{self.module} is not installed"


def count_files(directory: Path, pattern: str) -> int:
    return sum(1 for p in directory.rglob(pattern) if p.is_file())


def trace_bytes(directory: Path) -> int:
    """Every file the tool left under its output directory."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


_PID = re.compile(rb'"pid":\s*(\d+)')
_OVERFLOW = re.compile(rb'"overflow":\s*true')


@dataclass(frozen=True)
class ChromeTrace:
    processes: int
    overflow: bool  # viztracer's circular buffer filled: the file holds each process's end


def scan_chrome_trace(path: Path, chunk: int = 1 << 24) -> ChromeTrace:
    """Processes in a Chrome trace, read in chunks (viztracer's can be half a gigabyte)."""
    pids: set[bytes] = set()
    overflow = False
    tail = b""
    with path.open("rb") as f:
        while True:
            block = f.read(chunk)
            data = tail + block
            # A number that runs to the end of the data may go on in the next block.
            pids.update(m.group(1) for m in _PID.finditer(data)
                        if not block or m.end() < len(data))
            overflow = overflow or _OVERFLOW.search(data) is not None
            if not block:
                return ChromeTrace(len(pids), overflow)
            tail = data[-32:]  # a match cut at the boundary is found whole next time


def _viztracer_processes(directory: Path) -> int:
    return sum(scan_chrome_trace(p).processes for p in directory.glob("*.json"))


def _viztracer_warning(directory: Path) -> str | None:
    if any(scan_chrome_trace(p).overflow for p in directory.glob("*.json")):
        return ("its circular buffer (`--tracer_entries`, 1,000,000 a process by default) "
                "filled, so the trace keeps the end of each process's run: its size is the "
                "buffer's, not the run's")
    return None


def all_tools() -> list[Tool]:
    py = sys.executable
    return [
        Tool("flowmap", "flowmap", "flowmap",
             lambda job, out: [py, "-m", "flowmap", "trace", "-o", str(out), *job],
             lambda out: count_files(out, f"*{SHARD_SUFFIX}")),
        Tool("flowmap-values", "flowmap `--values` (reads sampled data)", "flowmap",
             lambda job, out: [py, "-m", "flowmap", "trace", "--values", "-o", str(out), *job],
             lambda out: count_files(out, f"*{SHARD_SUFFIX}")),
        Tool("memray", "memray `--follow-fork`", "memray",
             lambda job, out: [py, "-m", "memray", "run", "--follow-fork", "-q",
                               "-o", str(out / "memray.bin"), *job],
             lambda out: count_files(out, "memray*.bin*"), boot="memray"),
        Tool("torch", "torch.profiler (record_shapes, profile_memory)", "torch",
             lambda job, out: [py, str(TORCH_PROFILE), str(out / "torch-driver.json"), *job],
             lambda out: count_files(out, "torch-*.json"), boot="torch"),
        Tool("viztracer", "viztracer", "viztracer",
             lambda job, out: [py, "-m", "viztracer", "--quiet",
                               "-o", str(out / "viztracer.json"), "--", *job],
             _viztracer_processes, warning=_viztracer_warning),
    ]


def boot_env(tool: Tool, out: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment of a tool's run: `_peer_boot` first on PYTHONPATH when it needs it."""
    env = dict(base)
    if tool.boot:
        path = [str(PEER_BOOT), *filter(None, [env.get("PYTHONPATH")])]
        env.update(PYTHONPATH=":".join(path), FLOWMAP_BENCH_PEER=tool.boot,
                   FLOWMAP_BENCH_OUT=str(out))
    return env
