"""The hook: watch the program's Python calls for arguments and results that carry tensors.

The interpreter calls it through a profile function (3.11 and older) or `sys.monitoring`
(3.12+), both in `flowmap.discover.hooks`: either way a code object is decided
once, and only the calls of code watched cost more than a look.

Per watched call the cost is a look at the arguments (`record.find_tensors`);
only a call that carries a tensor is described, with `flowmap.capture.describe`
(metadata only). The references the pre-check collects are dropped before the
hook returns: nothing outlives the call. Watching stops for good when the
budget (seconds, calls, steps) is spent.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from flowmap.capture.describe import describe
from flowmap.discover import hooks, record
from flowmap.discover.filters import CodeInfo, Filters, decide
from flowmap.discover.record import CodeStats, find_tensors, storage_ids
from flowmap.seams import paths

_EMPTY: frozenset[int] = frozenset()
_OPTIM = f"{os.sep}torch{os.sep}optim{os.sep}"


@dataclass(slots=True, frozen=True)
class Budget:
    """When watching stops: whichever comes first (None: no limit of that kind)."""

    seconds: float | None = 60.0
    calls: int | None = 2_000_000  # watched calls, in this process
    steps: int | None = 5  # training steps (`flowmap.step`, or a preset's step path)

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "calls": self.calls, "steps": self.steps}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Budget:
        return cls(d.get("seconds"), d.get("calls"), d.get("steps"))


class Watcher:
    """Watches this process's calls until the budget is spent; `infos` holds what it saw."""

    def __init__(self, filters: Filters, budget: Budget,
                 step_targets: dict[tuple[str, str], str] | None = None,
                 on_stop: Callable[[], None] | None = None) -> None:
        self.filters = filters
        self.budget = budget
        self.step_targets = dict(step_targets or {})
        self.on_stop = on_stop
        self.cache: dict[CodeType, CodeInfo | None] = {}
        self.lock = threading.RLock()  # reentrant: a SIGTERM handler may stop mid-record
        self.recorded = threading.Event()  # a candidate call was recorded since the last look
        self.local = threading.local()
        self.calls = 0
        self.steps: set[int] = set()
        self.updates: dict[int, int] = {}  # id(optimizer) -> its updates, while no step is set
        self.explicit_steps = False
        self.stopped = False
        self.started_ns = 0
        self.watched_ns = 0
        self.stop_reason = ""
        #: How the interpreter calls this watch (`flowmap.discover.hooks`); None: not started.
        self.hook: hooks.Hook | None = None
        self._deadline = float("inf")
        #: Candidates by their first call after the first torch optimizer was made (None: not
        #: yet made): the training loop's order, setup's calls before it left out.
        self.calls_after_optimizer: dict[str, int] | None = None
        #: Arrays candidate calls returned and were not given (weakly held, with the call's
        #: key), when asked for (None: not kept): who made the data alive when a recording
        #: opens after the watch (`flowmap.discover.auto`).
        self.made: list[tuple[Callable[[], Any], str]] | None = None

    # -- life cycle -----------------------------------------------------------
    def start(self) -> None:
        self.started_ns = time.monotonic_ns()
        if self.budget.seconds is not None:
            self._deadline = time.monotonic() + self.budget.seconds
        self.hook = hooks.start(self, self.hook)

    def stop(self, reason: str = "the program ended") -> None:
        """Stop watching (idempotent); the first reason given is kept."""
        with self.lock:
            if self.stopped:
                return
            self.stopped = True
            self.stop_reason = reason
            self.watched_ns = time.monotonic_ns() - self.started_ns
        hooks.stop(self.hook)
        if self.on_stop is not None:
            self.on_stop()

    def reset_after_fork(self) -> None:
        """A forked child starts with empty counts and a budget of its own, as a spawned
        one does: its parent reports its own calls."""
        self.lock = threading.RLock()  # another thread may have held it at the fork
        self.recorded = threading.Event()
        for info in list(self.cache.values()):  # (the hook adds entries as this runs)
            if info is not None and info.stats is not None:
                info.stats = CodeStats()
        self.calls = 0
        self.steps = set()
        self.updates = {}
        self.watched_ns = 0
        if self.stopped:
            self.stopped = False
            self.stop_reason = ""
            self.start()
        else:
            self.started_ns = time.monotonic_ns()
            if self.budget.seconds is not None:
                self._deadline = time.monotonic() + self.budget.seconds

    def infos(self) -> list[CodeInfo]:
        return [i for i in self.cache.values() if i is not None and i.stats is not None]

    # -- decisions ------------------------------------------------------------
    def decide_code(self, code: CodeType, frame: FrameType) -> CodeInfo | None:
        module = frame.f_globals.get("__name__")
        qualname = getattr(code, "co_qualname", code.co_name)
        step = self.step_targets.get((module, qualname)) if isinstance(module, str) else None
        info = decide(code, module if isinstance(module, str) else None, self.filters)
        if info is not None:
            info.stats = CodeStats()
        elif step is not None:
            info = CodeInfo(str(module), qualname, code.co_filename, code.co_firstlineno, (), False)
        if info is not None:
            info.step = step
        elif (self.calls_after_optimizer is None and code.co_name == "__init__"
              and _OPTIM in code.co_filename):
            self.calls_after_optimizer = {}
        self.cache[code] = info
        return info

    # -- events ---------------------------------------------------------------
    def _stack(self) -> list[list[Any]]:
        try:
            return self.local.stack  # type: ignore[no-any-return]
        except AttributeError:
            self.local.stack = []
            return self.local.stack  # type: ignore[no-any-return]

    def enter(self, info: CodeInfo, frame: FrameType) -> None:
        loc = frame.f_locals
        if info.step is not None:
            self._step(loc, info.step)
            if self.stopped:
                return
        stats = info.stats
        if stats is None:
            return
        self.calls += 1
        stats.calls += 1
        after = self.calls_after_optimizer
        if after is not None and info.key not in after:
            after[info.key] = len(after)
        if (self.budget.calls is not None and self.calls >= self.budget.calls):
            self.stop(f"--calls {self.budget.calls} reached")
            return
        if not self.calls & 1023 and time.monotonic() > self._deadline:
            self.stop(f"--seconds {self.budget.seconds:g} reached")
            return
        if info.caller_module is None and "." not in info.qualname and frame.f_back is not None:
            info.caller_module = str(frame.f_back.f_globals.get("__name__", ""))
        found: list[Any] = []
        carried = []
        try:
            for name in info.argnames:
                v = loc.get(name)
                if v is not None and find_tensors(v, found):
                    carried.append(name)
            self_id = 0
            if info.has_self:
                me = loc.get("self")
                self_id = id(me)
                if info.nn_module is None:
                    info.nn_module = record.is_nn_module(me)
            if carried:
                self._given(info, loc, carried, self_id)
                d = describe({n: loc[n] for n in carried})
                entry = [info, id(frame), self_id, storage_ids(found), d.nbytes, d.leaves,
                         tuple(carried), None, [id(loc[n]) for n in carried]]
            else:
                entry = [info, id(frame), self_id, _EMPTY, -1, None, (), None, ()]
        except Exception:
            entry = [info, id(frame), 0, _EMPTY, -1, None, (), None, ()]
        found.clear()
        self._stack().append(entry)

    def _given(self, info: CodeInfo, loc: dict[str, Any], carried: list[str], self_id: int) -> None:
        """What a candidate call was given besides its payload (a model, `self`), and torch's
        grad mode: calls that differ in them are told apart in the written map (`split_by`)."""
        stats = info.stats
        if stats is None:
            return
        with self.lock:
            for name in info.argnames:
                v = loc.get(name)
                if name not in carried and record.is_given(v):
                    stats.see_given(name, id(v))
            if self_id:
                stats.see_given("self", self_id)
            torch = sys.modules.get("torch")
            if torch is not None:
                stats.grad_modes.add(bool(torch.is_grad_enabled()))

    def leave(self, info: CodeInfo, frame: FrameType, value: Any) -> None:
        stack = self._stack()
        fid = id(frame)
        while stack and stack[-1][1] != fid:
            if not any(e[1] == fid for e in stack):
                return  # a call that began before watching did
            stack.pop()  # left by an exception we did not see
        if not stack:
            return
        entry = stack.pop()
        found: list[Any] = []
        try:
            res = value is not None and find_tensors(value, found)
            res_ptrs = storage_ids(found) if res else _EMPTY
            d = describe(value) if res else None
        except Exception:
            res, res_ptrs, d = False, _EMPTY, None
        if res and self.made is not None:
            record.remember_made(self.made, info.key, found, entry[3])
        found.clear()
        last = entry[7]
        if last is not None and res_ptrs and last[2] == res_ptrs:
            last[1].delegated_to[info.key] += 1  # we returned our nested call's result as is
        if entry[4] < 0 and not res:
            return
        self._record(info, entry, stack, d, res_ptrs, res and id(value) in entry[8])

    def _record(self, info: CodeInfo, entry: list[Any], stack: list[list[Any]],
                d: Any, res_ptrs: frozenset[int], passed: bool) -> None:
        stats = info.stats
        own = entry[3]
        new = res_ptrs - own
        chain = []
        same = record.PASS_THROUGH if passed else 0
        for anc in reversed(stack[-record.MAX_CHAIN:]):
            flags = same
            if entry[2] and anc[2] == entry[2]:
                flags |= record.SAME_SELF
            if own and anc[3] and not own.isdisjoint(anc[3]):
                flags |= record.SHARES
            if new <= anc[3]:
                flags |= record.NOTHING_NEW
            chain.append((anc[0].key, flags))
        with self.lock:
            stats.candidate_calls += 1
            nbytes = 0
            if entry[4] >= 0:
                stats.call_bytes += entry[4]
                nbytes += entry[4]
                stats.args.update(entry[6])
                if stats.candidate_calls <= 4:
                    stats.add_leaves("", entry[5])
            if d is not None:
                stats.result_calls += 1
                stats.result_bytes += d.nbytes
                nbytes += d.nbytes
                if stats.result_calls <= 4:
                    stats.add_leaves("result", d.leaves)
            stats.max_bytes = max(stats.max_bytes, nbytes)
            stats.contexts[tuple(chain)] += 1
        self.recorded.set()
        if stack:
            stack[-1][7] = (info.key, stats, res_ptrs)

    def _step(self, loc: dict[str, Any], path: str) -> None:
        try:
            value = paths.resolve(loc, path)
        except Exception:
            return
        if not isinstance(value, int) or isinstance(value, bool):
            return
        if not self.explicit_steps:  # the program's own steps replace counted updates
            self.explicit_steps = True
            self.steps.clear()
        self._add_step(value)

    def optimizer_step(self, optimizer: Any) -> None:
        """A torch optimizer updated: a step, for a program that never sets one itself."""
        if self.stopped or self.explicit_steps:
            return
        with self.lock:
            n = self.updates[id(optimizer)] = self.updates.get(id(optimizer), 0) + 1
            if n == max(self.updates.values()):
                self._add_step(n)

    def _add_step(self, value: int) -> None:
        if value in self.steps:
            return
        self.steps.add(value)
        limit = self.budget.steps
        if limit is not None and len(self.steps) > limit:
            self.steps.discard(value)
            self.stop(f"--steps {limit} reached")


def process_id() -> str:
    """This process, for file names: host-pid."""
    import socket

    return f"{socket.gethostname().replace('-', '_') or 'host'}-{os.getpid()}"
