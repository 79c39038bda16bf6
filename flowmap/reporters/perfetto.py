"""Chrome Trace Event JSON of a run, for ui.perfetto.dev (and chrome://tracing).

Layout: one process per traced process (pid), one track (tid) per owner, named
by `M` metadata events. A hop is an instant in the trace, but Perfetto draws
and links slices, so each hop becomes two `X` slices of nominal width — one on
the sender's track, one on the receiver's — joined by a flow arrow (v1 `s` /
`f` events with `bp: "e"`, each placed strictly inside its slice). Counters
are `C` events on their process, marks and drops instants on their owner's
track.

Slices on a track never overlap: a burst of hops at one instant is laid end
to end, `MIN_SLICE_US` apart, so timing is exact to within that. Timestamps
are microseconds since the run started. Output is deterministic (events in a
fixed order, keys sorted).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from flowmap.errors import UsageError
from flowmap.gc_pause import paused_gc
from flowmap.model.format import NO_STEPS, fmt_dims, seam_label
from flowmap.model.processes import places
from flowmap.read.events import CounterFold, DropFold, MarkFold, SeamStep
from flowmap.read.reader import CounterSample, Drop, Hop, Leaf, Mark, Shard
from flowmap.reporters.output import check_output, write_output
from flowmap.reporters.perfetto_folded import folded_events
from flowmap.strict_json import finite

if TYPE_CHECKING:
    from flowmap.model.view import RunView

# A hop's slice: as wide as the gap to the next event on its track, within
# these bounds. 2 µs minimum so a flow event can sit strictly inside it.
MIN_SLICE_US = 2
MAX_SLICE_US = 50
MAX_ITEMS_IN_ARGS = 16
MAX_LEAVES_IN_ARGS = 32
WRITE_CHUNK = 20_000

Track = tuple[int, int]  # (pid, tid)
_Timed = TypeVar("_Timed", CounterSample, Mark, Drop, DropFold)


def perfetto_trace(view: RunView, *, steps: tuple[int, int] | None = None) -> dict[str, Any]:
    """The trace as a JSON-ready dict: `{"traceEvents": [...], ...}`.

    `steps=(first, last)` keeps the hops of those training steps (inclusive)
    and the counters, marks and drops of the time they span — a long run's
    full trace is more than a browser opens.
    """
    with paused_gc():  # four small dicts per hop, no cycles
        return _trace(_select(view, steps) if steps else _Part.whole(view))


@dataclass(frozen=True, slots=True)
class _Part:
    """The events of the run (or of the steps selected) and the figures the exporter reads."""

    path: str
    t0_ns: int
    num_steps: int
    shards: Sequence[Shard]
    hops: Sequence[Hop]
    counter_samples: Sequence[CounterSample]
    marks: Sequence[Mark]
    drops: Sequence[Drop]
    seam_steps: Sequence[SeamStep] = ()  # past the detail window: one slice each
    drop_folds: Sequence[DropFold] = ()  # one instant each

    @classmethod
    def whole(cls, view: RunView) -> _Part:
        ev = view.events
        return cls(view.path, view.t0_ns, view.step_count, ev.shards, ev.hops,
                   _with_folds(ev.counter_samples, ev.counter_folds, _mean_sample),
                   _with_folds(ev.marks, ev.mark_folds, _first_mark), ev.drops, ev.seam_steps,
                   ev.drop_folds)


def _with_folds(records: Sequence[_Timed], folds: Sequence[Any],
                drawn: Any) -> Sequence[_Timed]:
    """`records` and a drawable record per fold (`trace --aggregate`), in time order."""
    if not folds:
        return records
    return sorted([*records, *map(drawn, folds)], key=lambda r: r.t_ns)


def _mean_sample(f: CounterFold) -> CounterSample:
    """A folded counter is drawn as one point: the step's mean, at its last sample."""
    return CounterSample(f.t_ns, f.pid, f.name, f.total / f.count, f.owner)


def _first_mark(f: MarkFold) -> Mark:
    """Folded markers are drawn as one instant, at the first, naming how many they were."""
    return Mark(f.t_first_ns, f.pid, f.name if f.count == 1 else f"{f.name} (x{f.count})",
                f.owner)


def _select(view: RunView, steps: tuple[int, int]) -> _Part:
    first, last = steps
    ev = view.events
    hops = [h for h in ev.hops if h.step is not None and first <= h.step <= last]
    folded = [st for st in ev.seam_steps if st.step is not None and first <= st.step <= last]
    if not hops and not folded:
        if not view.steps:
            raise UsageError(f"this run has {NO_STEPS}; export it whole, without --steps")
        raise UsageError(f"no hops in steps {first}..{last}; this run has steps "
                         f"{view.steps[0]}..{view.steps[-1]}")
    lo = min([h.t_ns for h in hops[:1]] + [st.t_first_ns for st in folded])
    hi = max([h.t_ns for h in hops[-1:]] + [st.t_ns for st in folded])

    def within(events: Sequence[_Timed]) -> list[_Timed]:
        return [e for e in events if lo <= e.t_ns <= hi]

    whole = _Part.whole(view)
    return _Part(view.path, view.t0_ns, last - first + 1, ev.shards, hops,
                 within(whole.counter_samples), within(whole.marks), within(ev.drops), folded,
                 within(ev.drop_folds))


def _trace(run: _Part) -> dict[str, Any]:
    tracks = _tracks(run)
    events: list[dict[str, Any]] = _metadata(run, tracks)
    timed: list[tuple[int, int, dict[str, Any]]] = []  # (ts, tie-break, event)
    per_schema: dict[int, dict[str, Any]] = {}
    for n, (h, src_ts, src_dur, dst_ts, dst_dur) in enumerate(_slices(run, tracks)):
        args = _hop_args(h, per_schema)
        timed += _hop_events(h, n, args, tracks, (src_ts, src_dur), (dst_ts, dst_dur))
    timed += _counter_events(run, tracks)
    if run.seam_steps:
        meta, slices = folded_events(run.seam_steps, run.t0_ns,
                                     max((tid for _, tid in tracks.values()), default=0) + 1)
        events += meta
        timed += slices
    timed += _instant_events(run, tracks)
    timed.sort(key=lambda e: (e[0], e[1]))
    events += [e for _, _, e in timed]
    return {
        "displayTimeUnit": "ms",
        "otherData": {"flowmap": "perfetto", "run": run.path, "steps": run.num_steps},
        "traceEvents": events,
    }


@dataclass(frozen=True, slots=True)
class PerfettoOptions:
    """`steps=(first, last)` keeps those training steps only (inclusive); None keeps all."""

    steps: tuple[int, int] | None = None


def report(view: RunView, options: PerfettoOptions) -> Iterator[str]:
    """The trace as compact JSON (keys sorted), in chunks that together are one document.

    The trace is built before the first chunk; each chunk encodes `WRITE_CHUNK`
    events, so a long run's text is never held whole.
    """
    return _chunks(perfetto_trace(view, steps=options.steps))


def write_perfetto(view: RunView, path: str, *, steps: tuple[int, int] | None = None) -> str:
    """Write the trace to `path` (compact JSON, keys sorted); returns the path written."""
    check_output(path)
    chunks = report(view, PerfettoOptions(steps))
    with paused_gc():
        return write_output(path, chunks)


def _chunks(trace: dict[str, Any]) -> Iterator[str]:
    encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode

    def dumps(doc: Any) -> str:
        try:
            return encode(doc)
        except ValueError:  # a NaN or infinity: null, as strict JSON wants
            return encode(finite(doc))

    events = trace.pop("traceEvents")
    head = dumps(trace)[:-1]  # the other top-level keys sort before "traceEvents"
    yield head + ',"traceEvents":['
    # The C encoder works on whole lists; `json.dump` would take the slow path.
    for i in range(0, len(events), WRITE_CHUNK):
        yield ("," if i else "") + dumps(events[i:i + WRITE_CHUNK])[1:-1]
    yield "]}"


def _us(run: _Part, t_ns: int) -> int:
    return (t_ns - run.t0_ns) // 1000


# -- tracks -----------------------------------------------------------------------


def _tracks(run: _Part) -> dict[str, Track]:
    """Owner -> (pid, tid), tids in order of first appearance.

    A hop is recorded by one process but names two owners, so the owner's
    process is taken from the strongest evidence there is: the process that
    said the owner runs there (an `i owner` event), else counters, marks and
    drops (recorded by the owner's own running code), else the hops it sends,
    else the hops it receives; the most frequent pid wins.
    """
    runs_in: dict[str, Counter[int]] = defaultdict(Counter)
    sends: dict[str, Counter[int]] = defaultdict(Counter)
    receives: dict[str, Counter[int]] = defaultdict(Counter)
    first: dict[str, int] = {}
    for h in run.hops:
        sends[h.src][h.pid] += 1
        receives[h.dst][h.pid] += 1
        first.setdefault(h.src, h.t_ns)
        first.setdefault(h.dst, h.t_ns)
    owned: list[CounterSample | Mark | Drop | DropFold] = [
        *run.counter_samples, *run.marks, *run.drops, *run.drop_folds]
    for ev in owned:
        if ev.owner:
            runs_in[ev.owner][ev.pid] += 1
            first[ev.owner] = min(first.get(ev.owner, ev.t_ns), ev.t_ns)
    said = {o: s.pid for s in reversed(run.shards) for o in s.owners}  # the first shard's wins
    out = {}
    for tid, owner in enumerate(sorted(first, key=lambda o: (first[o], o)), start=1):
        votes = runs_in.get(owner) or sends.get(owner) or receives[owner]
        pid = said.get(owner, min(votes, key=lambda p: (-votes[p], p)))
        out[owner] = (pid, tid)
    return out


def _metadata(run: _Part, tracks: dict[str, Track]) -> list[dict[str, Any]]:
    names = {s.pid: s.process or _owners_label(tracks, s.pid) or _script(s.argv) for s in run.shards}
    names.update({pid: _owners_label(tracks, pid) for pid, _ in tracks.values() if not names.get(pid)})
    pids = sorted({pid for pid, _ in tracks.values()} | set(names))
    # A process track per host and pid: records carry the run's number for a process, unique
    # even where two hosts' processes are both pid 1 (`flowmap.read.identity`); the label
    # gives the pid the OS gave, and its host (and Ray node) where the run has several.
    where = places(run.shards)
    out = []
    for i, pid in enumerate(pids):
        os_pid, at = where.get(pid, (pid, ""))
        label = f"{names.get(pid) or 'process'} (pid {os_pid}{at})"
        out.append(_meta("process_name", pid, 0, {"name": label}))
        out.append(_meta("process_sort_index", pid, 0, {"sort_index": i}))
    for owner, (pid, tid) in sorted(tracks.items(), key=lambda kv: kv[1][1]):
        out.append(_meta("thread_name", pid, tid, {"name": owner}))
        out.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
    return out


def _script(argv: Sequence[str]) -> str:
    """`train.py` for a process with neither a name nor an owner; "" for `python -c` and the like."""
    names = [os.path.basename(a) for a in argv if a.endswith(".py")]
    return names[0] if names else ""


def _owners_label(tracks: dict[str, Track], pid: int, most: int = 3) -> str:
    """`rollout/0`, or `driver, batcher, env +4`: the owners whose tracks a process holds.

    Not the script's name: every process of a run is `python` or `flowmap`.
    """
    owners = [o for o, (p, _) in sorted(tracks.items(), key=lambda kv: kv[1][1]) if p == pid]
    more = f" +{len(owners) - most}" if len(owners) > most else ""
    return ", ".join(owners[:most]) + more


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


# -- hops as slices ---------------------------------------------------------------


def _slices(run: _Part, tracks: dict[str, Track]) -> list[tuple[Hop, int, int, int, int]]:
    """Each hop with (start, duration) in µs of its sender-side and receiver-side slices."""
    wanted: dict[Track, list[tuple[int, int, int]]] = defaultdict(list)  # (ts, hop, side)
    for n, h in enumerate(run.hops):
        ts = _us(run, h.t_ns)
        wanted[tracks[h.src]].append((ts, n, 0))
        wanted[tracks[h.dst]].append((ts, n, 1))
    placed: list[list[int]] = [[0, 0, 0, 0] for _ in run.hops]
    for spans in wanted.values():
        spans.sort()
        starts: list[int] = []
        cursor = -MIN_SLICE_US
        for ts, _, _ in spans:
            starts.append(max(ts, cursor))
            cursor = starts[-1] + MIN_SLICE_US
        for i, (_, n, side) in enumerate(spans):
            gap = starts[i + 1] - starts[i] if i + 1 < len(starts) else MAX_SLICE_US
            placed[n][2 * side] = starts[i]
            placed[n][2 * side + 1] = min(MAX_SLICE_US, gap)
    return [(h, p[0], p[1], p[2], p[3]) for h, p in zip(run.hops, placed)]


def _hop_events(h: Hop, n: int, args: dict[str, Any], tracks: dict[str, Track],
                src_span: tuple[int, int],
                dst_span: tuple[int, int]) -> list[tuple[int, int, dict[str, Any]]]:
    """The hop's two slices and the flow between them (flow points 1 µs inside each slice).

    The sender's slice carries the full args; the receiver's only the seam and
    its bytes (one arrow away), which keeps a long run's file about a third
    smaller.
    """
    (spid, stid), (dpid, dtid) = tracks[h.src], tracks[h.dst]
    (sts, sdur), (dts, ddur) = src_span, dst_span
    flow = {"cat": "flow", "id": n, "name": h.name}
    return [
        (sts, 1, {"ph": "X", "cat": "hop", "name": f"{h.name} → {h.dst}", "pid": spid,
                  "tid": stid, "ts": sts, "dur": sdur, "args": args}),
        (sts + 1, 2, {"ph": "s", **flow, "pid": spid, "tid": stid, "ts": sts + 1}),
        (dts, 1, {"ph": "X", "cat": "hop", "name": f"{h.name} ← {h.src}", "pid": dpid,
                  "tid": dtid, "ts": dts, "dur": ddur,
                  "args": {"seam": args["seam"], "bytes": args["bytes"]}}),
        (dts + 1, 3, {"ph": "f", "bp": "e", **flow, "pid": dpid, "tid": dtid, "ts": dts + 1}),
    ]


def _leaf_args(leaves: tuple[Leaf, ...]) -> dict[str, Any]:
    """The per-schema part of a hop's args (schemas are shared, so this is computed once each)."""
    shown = leaves[:MAX_LEAVES_IN_ARGS]
    args: dict[str, Any] = {
        "shapes": {leaf.path: f"{leaf.dtype or leaf.kind}[{fmt_dims(leaf.shape)}] {leaf.nbytes} B"
                   for leaf in shown},
        "dtypes": sorted({leaf.dtype for leaf in shown if leaf.dtype}),
    }
    if len(leaves) > MAX_LEAVES_IN_ARGS:
        args["num_leaves"] = len(leaves)
    return args


def _hop_args(h: Hop, per_schema: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """What Perfetto shows when a slice is clicked: seam, bytes, shapes, dtypes, items."""
    leaf_args = per_schema.get(id(h.leaves))
    if leaf_args is None:
        leaf_args = per_schema[id(h.leaves)] = _leaf_args(h.leaves)
    args: dict[str, Any] = {
        "seam": seam_label(h.seam),
        "bytes": h.nbytes,
        "transport": h.transport,
        **leaf_args,
    }
    if h.step is not None:
        args["step"] = h.step
    if h.version is not None:
        args["version"] = h.version
    if h.items:
        args["items"] = list(h.items[:MAX_ITEMS_IN_ARGS])
        args["num_items"] = len(h.items)
    return args


# -- counters, marks, drops -----------------------------------------------------


def _counter_events(run: _Part, tracks: dict[str, Track]) -> list[tuple[int, int, dict[str, Any]]]:
    owners: dict[str, set[str]] = defaultdict(set)
    for c in run.counter_samples:
        owners[c.name].add(c.owner)
    out = []
    for c in run.counter_samples:
        if not math.isfinite(c.value):
            continue  # JSON has no NaN; a gap in the chart says the same
        name = c.name if len(owners[c.name]) == 1 else f"{c.name} [{c.owner or '?'}]"
        ts = _us(run, c.t_ns)
        tid = tracks[c.owner][1] if c.owner in tracks and tracks[c.owner][0] == c.pid else 0
        out.append((ts, 0, {"ph": "C", "name": name, "pid": c.pid, "tid": tid, "ts": ts,
                            "args": {"value": c.value}}))
    return out


def _instant_events(run: _Part, tracks: dict[str, Track]) -> list[tuple[int, int, dict[str, Any]]]:
    out = []
    for m in run.marks:
        ts = _us(run, m.t_ns)
        ev = {"ph": "i", "cat": "mark", "name": m.name, "ts": ts, "pid": m.pid}
        if m.owner in tracks:
            ev.update({"s": "t", "tid": tracks[m.owner][1], "pid": tracks[m.owner][0]})
        else:
            ev["s"] = "p"
        out.append((ts, 4, ev))
    for d in run.drops:
        ts = _us(run, d.t_ns)
        pid, tid = tracks[d.owner]
        out.append((ts, 4, {"ph": "i", "cat": "drop", "name": f"drop: {d.reason}", "s": "t",
                            "pid": pid, "tid": tid, "ts": ts,
                            "args": {"items": list(d.items[:MAX_ITEMS_IN_ARGS]),
                                     "num_items": len(d.items)}}))
    for f in run.drop_folds:  # folded: one instant at the first, with the counts
        ts = _us(run, f.t_first_ns)
        pid, tid = tracks[f.owner]
        out.append((ts, 4, {"ph": "i", "cat": "drop", "name": f"drop: {f.reason}", "s": "t",
                            "pid": pid, "tid": tid, "ts": ts,
                            "args": {"drops": f.count, "num_items": f.num_items,
                                     "step": f.step}}))
    return out
