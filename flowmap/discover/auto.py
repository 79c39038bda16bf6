"""`flowmap trace SCRIPT` with no seam map: find the seams in the first step, record the rest.

A script nobody instrumented would record nothing. So, when no map is given
(and the program neither records a hop of its own nor uses the capture API, an
owner, a step, a seam, while it is watched),
the run starts the way `flowmap discover` does: its calls are watched (a
profile hook, metadata only) until the first optimizer update, a time limit or
the program's end, whichever comes first. At that moment the watched calls are
folded and ranked as discover ranks them, the map it would write is written
into the run (`auto-seams.yaml`, owners named after the script's own functions
and classes), and its targets are patched in place: every later call of them
is recorded as a `--seams` run records it. Watching stops there, so only the
first step pays for it.

The data of that first step is not recorded (it was being watched), and
recording starts with the next call of the training loop's first function (the
first one called after the optimizer was made), so that an update in the middle
of an iteration does not make the stages first appear out of order; the run
says so in one line. Only this process is watched: children start with no map.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flowmap import rundir
from flowmap.capture import api, forksafe, importhook, state
from flowmap.capture.describe import describe
from flowmap.discover import hooks, naming, process, seammap
from flowmap.discover.candidates import Candidate, analyse
from flowmap.discover.filters import Filters
from flowmap.discover.watch import Budget, Watcher
from flowmap.seams import wrapper
from flowmap.trace_format import UNTRACED
from flowmap.units import plural

MAP_NAME = "auto-seams.yaml"
WATCH_SECONDS = 30.0  # a first step slower than this: the seams seen so far are recorded
# Updates without the loop's first function after which the recording opens anyway: few
# when the watch saw it called once (a setup call, `env.reset(seed=...)`, may never come
# back), many when it saw it called again and again (`rollout()` per sample: the loop's
# own, and an iteration may hold many updates, five per rollout batch in nano-rl).
HOLD_UPDATES = 3
HOLD_LOOP_UPDATES = 64


class AutoSeams:
    """The watch of one traced process and what came of it (`summary`)."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.lock = threading.Lock()
        steps = {k: v for k, v in process.step_targets().items() if k[0] != api.__name__}
        self.watcher = Watcher(Filters(), Budget(WATCH_SECONDS, None, 0), steps,
                               on_stop=self._found)
        self.watcher.made = []  # who made the data the recording will meet first
        self.makers: dict[str, str] = {}  # a stage's code key -> its owner in the map
        self.instrumented = False  # the program used the capture API: it tells its own story
        self.targets: list[tuple[str, str]] = []  # (target, owner) patched
        self.failed = 0
        self.watched_s = 0.0
        self.why = ""
        self.error = ""
        self.done = False
        self.watching = False
        self.restore_import: Callable[[], None] = lambda: None
        self.started = time.monotonic()
        self.pid = os.getpid()
        self.opener: str | None = None  # the target whose next call starts the recording
        self.held_updates = 0
        self.hold_updates = HOLD_UPDATES  # held updates before recording opens anyway
        self.gave_up = 0  # the update the recording opened at, the opener not called again

    def start(self) -> None:
        """Count updates and watch, from now on."""
        importhook.on_import("torch.optim.optimizer", self._count_updates)
        state.on_declared = self._declared
        forksafe.at_fork(after_in_child=self._forked)
        self.watching = True
        self.started = time.monotonic()
        self.watcher.start()
        if sys.version_info < (3, 12):
            self._unwatched_imports()

    def _unwatched_imports(self) -> None:
        """While watching, an `import` runs with the hook off: the script's imports, and the
        first step's lazy ones (torch loads dynamo and sympy at its first optimizer), run
        millions of Python calls, none a hand-over, each an event of a profile hook."""
        import builtins

        plain = builtins.__import__
        watcher = self.watcher
        quiet = hooks.quiet_import(plain, watcher.hook, lambda: watcher.stopped)

        def restore() -> None:
            if builtins.__import__ is quiet:
                builtins.__import__ = plain

        self.restore_import = restore
        builtins.__import__ = quiet

    def finish(self, reason: str = "the program ended") -> None:
        """The program ended: stop watching (the map is made now if the watch never ended)."""
        if self.watching:
            self.watcher.stop(reason)

    def _declared(self) -> None:
        """The program called `flowmap.owner`, `step`, `seam`...: it is instrumented, so the
        watch ends now (its profile hook costs every call) and no seam is added."""
        self.instrumented = True
        if self.watching:
            self.watcher.stop("the program is instrumented")

    def _forked(self) -> None:
        """A forked child stops watching: the map is its parent's to make and write."""
        self.pid = -1
        self.watcher.stop("forked")

    def _count_updates(self, module: ModuleType) -> None:
        register = getattr(module, "register_optimizer_step_post_hook", None)
        if register is not None:
            register(self._updated)

    def _updated(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.watcher.stopped:
            self.watcher.optimizer_step(optimizer)
            return
        if self.opener and wrapper.held():  # the opener never came back: a setup function
            self.held_updates += 1
            if self.held_updates >= self.hold_updates:
                self.gave_up = self.held_updates + 1
                wrapper.hold_until(None)

    def _found(self) -> None:
        """The watch ended (in the hook, at an update, or at exit): write and apply the map."""
        with self.lock:
            if self.done or self.pid != os.getpid():
                return
            self.done = True
        state.on_declared = None
        self.watched_s = time.monotonic() - self.started
        self.why = self.watcher.stop_reason
        self.restore_import()
        try:
            self._apply()
        except Exception as exc:  # never into the user's program
            self.error = f"{type(exc).__name__}: {exc}"
            wrapper.hold_until(None)
        finally:
            if not self.makers:
                self.watcher.made = None  # nothing will be recorded to name them in

    def _apply(self) -> None:
        from flowmap.capture.script import main_module
        from flowmap.seams import parse_seam_map
        from flowmap.seams.patcher import MAIN, Patcher

        if self.instrumented or _records_its_own_hops():
            return  # instrumented (flowmap.hop, @flowmap.seam) or a transport's: nothing added
        records = [process.snapshot(self.watcher)]
        naming.recheck(records)
        found = analyse(records)
        found.seams = [c for c in found.seams if c.fn.target and not c.fn.ray]
        if not found.seams:
            return
        text = seammap.render(found, "flowmap trace (seams found in the first step)", honest=True)
        path = os.path.join(self.run_dir, MAP_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        seam_map = parse_seam_map(text, path, trusted=True)  # rendered just now, by us
        self.opener = self._opener(found.seams)
        calls = {str(c.fn.target): c.calls for c in found.seams}
        if calls.get(self.opener or "", 0) > 1:
            self.hold_updates = HOLD_LOOP_UPDATES
        self.makers = {c.fn.key: s.owner for c in found.seams for s in seam_map.seams
                       if s.target == str(c.fn.target) and not s.split_by}
        wrapper.hold_until(self.opener, self._opened)  # from the start of the next iteration
        patcher = Patcher(seam_map, warn=False)
        patcher.install()  # targets in imported modules: patched now
        module = main_module()
        if module is not None and patcher.has_main_targets():
            for top in sorted({s.qualname.split(".", 1)[0] for s in seam_map.seams
                               if s.module == MAIN}):
                patcher.bind_main(module, top)
        self.targets = [(s.target, s.owner) for s in seam_map.seams if s.target in patcher.patched]
        owners = {s.target: s.owner for s in seam_map.seams}
        seen = [owners[t] for t in self._in_call_order(found.seams) if t in owners]
        rundir.write_meta(self.run_dir, watched_stages=list(dict.fromkeys(seen)))
        self.failed = len(patcher.failed)
        if self.opener not in patcher.patched:  # its call would never open the recording
            self.opener = None
            wrapper.hold_until(None)

    def _opened(self) -> None:
        """The recording opens: name who made the data still alive that the watch saw a
        stage return (`o` lines), so data made in the watched step is drawn from its stage,
        not from the first stage that hands it on (a replay buffer's `sample`)."""
        made, self.watcher.made = self.watcher.made or [], None
        if made and self.makers:
            name_makers([(obj, owner) for ref, key in made
                         if (owner := self.makers.get(key)) is not None
                         and (obj := ref()) is not None])

    def _opener(self, seams: list[Candidate]) -> str | None:
        """The target the training loop starts with: of the functions called after the first
        optimizer was made (before it: setup), the one called first; else the first called.
        A function the script also called before (`env.reset(seed=...)` at its top level) is
        still the loop's first when the loop begins with it."""
        after = dict(self.watcher.calls_after_optimizer or {})
        loop = sorted((after[c.fn.key], str(c.fn.target)) for c in seams if c.fn.key in after)
        ranked = self._first_calls(seams)
        return loop[0][1] if loop else ranked[0][1] if ranked else None

    def _in_call_order(self, seams: list[Candidate]) -> list[str]:
        """The targets in the order the watch first saw them called: what the report tells of
        a run stopped before anything was recorded (Ctrl-C in the first step)."""
        return [t for _, t in self._first_calls(seams)]

    def _first_calls(self, seams: list[Candidate]) -> list[tuple[int, str]]:
        first: dict[str, int] = {}
        for i, info in enumerate(list(self.watcher.cache.values())):
            if info is not None:
                first.setdefault(info.key, i)
        return sorted((first[c.fn.key], str(c.fn.target)) for c in seams if c.fn.key in first)

    def summary(self) -> str:
        """The one line the run ends with: what the automatic mode did."""
        if self.instrumented:
            return ("flowmap: no seam map given, and the program uses flowmap's API (an owner, "
                    "a step...), so no seams were looked for.")
        if self.error:
            return (f"flowmap: finding seams failed ({self.error}); nothing was recorded "
                    "automatically. Try flowmap discover SCRIPT.")
        when = ("until its first optimizer update" if "--steps" in self.why else
                f"for its first {self.watched_s:.0f} s" if "--seconds" in self.why else
                "until it was interrupted, before its first optimizer update"
                if "interrupted" in self.why else "to its end (it made no optimizer update)")
        if not self.targets:
            return (f"flowmap: no seam map given: watched the program {when} and found no "
                    "function that hands tensors over.")
        rel = os.path.relpath(os.path.join(self.run_dir, MAP_NAME))
        names = ", ".join(dict.fromkeys(owner for _, owner in self.targets))
        opener = (self.opener or "").split(":", 1)[-1]
        recorded = ("had nothing left to record (flowmap discover SCRIPT watches longer)"
                    if not self.why.startswith("--") else
                    f"recorded every call from update {self.gave_up} on ({opener}() was not "
                    "called again)" if opener and self.gave_up else
                    f"recorded every call from the next {opener}() on" if opener else
                    "recorded every later call")
        return (f"flowmap: no seam map given: watched the program {when}, found "
                f"{plural(len(self.targets), 'seam')} ({names}) and {recorded}; map in {rel} "
                "(edit it and pass --seams; --no-auto-seams turns this off).")


#: Owners of hops a program makes without telling its story: a torch DataLoader's worker
#: processes (`processes.loader_workers`) and a send's receiver not yet traced. A single-file
#: trainer with `num_workers=2` sends them in its first step; they must not stand the watch
#: down, or the script records its loader's index queue and nothing else.


def _records_its_own_hops() -> bool:
    """Whether the program recorded a hop while it was watched: its shard has a seam
    between two owners of its own (flowmap.hop, @flowmap.seam, a transport between them)."""
    t = state.tracer
    seams = getattr(t.writer, "seams", None) if t is not None else None
    return any(not _incidental(src) and not _incidental(dst) for src, dst, _ in (seams or {}))


def _incidental(owner: str) -> bool:
    from flowmap.integrations import processes

    return owner.split("/", 1)[0] == UNTRACED or owner in processes.loader_workers


_auto: AutoSeams | None = None


def start(run_dir: str) -> AutoSeams | None:
    """Watch this process for seams; None when it cannot be watched."""
    global _auto
    try:
        _auto = AutoSeams(run_dir)
        _auto.start()
    except Exception as exc:
        sys.stderr.write(f"flowmap: cannot watch for seams ({exc}); nothing is recorded "
                         "automatically.\n")
        return None
    return _auto


def name_makers(made: list[tuple[Any, str]]) -> None:
    """An `o` line per storage of these arrays (array, the owner that made it), alive since
    before the recording opened; a storage is named once, by the first owner given."""
    t = state.tracer
    named: set[str] = set()
    for obj, owner in made:
        d = describe(obj)
        if t is None or len(d.storages) != 1:
            continue
        with t.lock:
            if t.closed:
                return
            sid = t.writer.storage_ids(d.storages, d.holders)
            if sid not in named:
                named.add(sid)
                t.writer.origin(sid, owner)
