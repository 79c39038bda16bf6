"""One watch over a run: poll the incremental reader, rebuild the model when it grew, keep rates.

`top`, the live page and `/metrics` each hold a `Watch` and call `update()`
every `UPDATE_S`; what they show is the `Frame` it returns. Each update reads
what was appended and rebuilds the model whole from the reader (the read model
is built whole, never patched) when new bytes came, so a hop shows within
`UPDATE_S` plus the read and the rebuild. Reading right before rebuilding, not
more often, is what keeps that delay short at the least cost: a rebuild costs
per seam-step, whatever was read. A run whose model costs more than
`MAX_BUSY` of the wall time is rebuilt less often, so watching it stays a
small share of a core.
Steps older than a horizon are held in blocks (`flowmap.read.blocks`), so a long run's
frames keep every sum exact and read per-step figures from each block's own.
Findings, the costliest part, wait for the second update (the first screen
comes without them) and are recomputed at most every `FINDINGS_EVERY_S`. The
reader holds `flowmap report`'s detail window while frames read a smaller one
(`flowmap.read.live_window`), so once the program has ended and its last bytes
are read, the last frame is a snapshot of what the reader holds, in the report's
window, with its findings found at once: the report's figures and findings, not
a second read of the run. A run directory removed and made anew (a tracer
starts over in it) is watched anew from its start.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from flowmap.findings import Finding, findings
from flowmap.live.rates import Rates
from flowmap.live.status import RUNNING, Status, status
from flowmap.model.run import Run
from flowmap.model.types import SeamKey
from flowmap.read.blocks import StepBlocks
from flowmap.read.fold import DETAIL_HOPS
from flowmap.read.incremental import LIVE_DETAIL_HOPS, IncrementalReader, RunGone

UPDATE_S = 1.0  # read and rebuild: a hop shows within this, plus one read and one rebuild
MAX_BUSY = 0.03  # share of wall time one watch spends rebuilding the model, at most
FINDINGS_EVERY_S = 5.0
READ_BUDGET_S = 0.5  # reading per update at most, while a large run is caught up with


@dataclass(slots=True)
class Frame:
    """What a viewer shows at one moment."""

    run: Run
    status: Status
    rates: dict[SeamKey, tuple[float, float]]  # seam -> (bytes/s, hops/s), recent window
    findings: tuple[Finding, ...]
    updated_s: float  # wall time of the model's last rebuild
    gone: str | None = None  # the sentence once the run was removed; the frame is the last one
    behind: bool = False  # read in pieces: the run has bytes not read yet
    found_s: float = 0.0  # when `findings` were found (monotonic; 0: not yet)
    fresh_s: float = 0.0  # wall time the watch last read new bytes of the run (0: none yet)
    epoch: int = 0  # how many times the run was made anew while watched (its figures restart)


class Watch:
    """One viewer's hold on a run: the reader, the latest frame, and what rebuilding costs."""

    def __init__(self, path: str, live_hops: int = LIVE_DETAIL_HOPS,
                 blocks: StepBlocks | None = None) -> None:
        self._args = (path, live_hops)
        self.epoch = -1
        self._start(blocks)

    def _start(self, blocks: StepBlocks | None = None) -> None:
        """Watch the run from its start (again, once it was made anew)."""
        path, live_hops = self._args
        self.epoch += 1
        # old steps held in blocks past a horizon (`flowmap.read.blocks`): what the watch
        # holds and rebuilds stays bounded however long the run; frames read `live_hops`
        # hops of each process one by one, the end the report's window
        self.reader = IncrementalReader(path, DETAIL_HOPS, blocks or StepBlocks(),
                                        live_hops=live_hops)
        self.rates = Rates()
        self.frame: Frame | None = None
        self._built_s = 0.0
        self._build_cost_s = 0.0
        self._findings_cost_s = 0.0
        self._findings_s = -FINDINGS_EVERY_S  # due at the second update
        self._found_run: Run | None = None  # the run the frame's findings were found in
        self._pending = False  # bytes read that the model does not show yet
        self.behind = False  # the last update stopped reading with bytes left: catching up
        self._whole = False  # the frame is the ended run in the report's window
        self._fresh_s = 0.0

    @property
    def path(self) -> str:
        return self.reader.path

    def update(self) -> Frame:
        """Poll; rebuild the model if it grew (and its cost allows); the frame to show."""
        if self.frame is not None and self.frame.gone:
            if not os.path.exists(self.path):
                return self.frame
            self._start()  # made anew (a tracer starts over in it): watched from its start
        try:
            self._read()
        except RunGone as exc:
            if self.frame is None:
                raise
            self.frame.gone = str(exc)
            return self.frame
        now = time.monotonic()
        first = self.frame is None
        # at every update that read something, unless the model costs more than MAX_BUSY
        # of the time since the last rebuild (a run of many seams x steps)
        if first or (self._pending and self._build_cost_s <= MAX_BUSY * (now - self._built_s)):
            self._rebuild(now)
        frame = self.frame
        assert frame is not None
        if not first:
            self._find(frame, now)
        frame.behind = self.behind
        if self.behind:  # a run read in part can look cut short: its `end` lines are unread
            frame.status = Status(RUNNING, "reading the run so far")
        elif frame.status.state == RUNNING or self._pending:
            frame.status = status(frame.run)  # a program's death shows without new bytes
            if self._pending and frame.status.state != RUNNING and frame.status.final:
                # an end shows with its last bytes (not so a killed main: its children write
                # on): they are built now, whatever the rebuild costs, once
                self._rebuild(now)
                frame = self.frame
                assert frame is not None
            self.rates.add(time.time(), frame.run.seams)
            frame.rates = self.rates.per_second()
        frame.fresh_s, frame.epoch = self._fresh_s, self.epoch
        if (frame.status.state != RUNNING and frame.status.final and not self.behind
                and not self._pending and not self._whole):
            frame = self._finish(frame, now)
        return frame

    def _finish(self, frame: Frame, now: float) -> Frame:
        """The program has ended and its last bytes are built: the last frame is the run in
        `flowmap report`'s window, a snapshot of what the reader holds (not a second read of
        the run), with its findings, found now."""
        self._rebuild(now, whole=True)
        last = self.frame
        assert last is not None
        last.status, last.rates, last.fresh_s, last.epoch = (
            frame.status, frame.rates, frame.fresh_s, frame.epoch)
        t = time.thread_time()
        last.findings = tuple(findings(last.run.view))
        self._findings_cost_s = time.thread_time() - t
        last.found_s = self._findings_s = now
        self._found_run = last.run
        return last

    def _read(self) -> None:
        """Poll until nothing is new or the time for one update is spent: a large run is
        read in pieces, so the first screen comes fast and later ones keep their pace."""
        end = time.monotonic() + READ_BUDGET_S
        while True:
            got = self.reader.poll()
            if got > 0:
                self._pending, self._fresh_s = True, time.time()
            more = self.reader.more  # a shard had more than one read's worth waiting
            self.behind = more and time.monotonic() >= end
            if not more or self.behind:
                return

    def _rebuild(self, now: float, whole: bool = False) -> None:
        t = time.thread_time()  # CPU time: a busy machine does not make it look costly
        run = self.reader.records(Run, whole)
        _ = run.seams, run.owners, run.counters
        if not whole:  # what a frame costs (the end's, in the larger window, is built once)
            self._build_cost_s = time.thread_time() - t
        self._built_s, self._pending, self._whole = now, False, whole
        old = self.frame
        self.frame = Frame(run, Status(RUNNING, "reading the run so far") if self.behind
                           else status(run), {}, old.findings if old else (), time.time(),
                           behind=self.behind, found_s=old.found_s if old else 0.0)

    def _find(self, frame: Frame, now: float) -> None:
        """Findings of the frame's run, when due: never on the first update (the first
        screen does not wait for them), then at most every FINDINGS_EVERY_S."""
        if self._found_run is frame.run or now - self._findings_s < max(
                FINDINGS_EVERY_S, self._findings_cost_s / MAX_BUSY):
            return
        t = time.thread_time()
        frame.findings = tuple(findings(frame.run.view))
        self._findings_cost_s = time.thread_time() - t
        self._findings_s, self._found_run = now, frame.run
        frame.found_s = now
