"""Merge the shards of runs collected from several hosts into one run, clocks aligned.

On one host every shard's events are on the shared monotonic clock, which is
how a run directory merges on read. Across hosts the monotonic clocks are
unrelated (a host is a hostname, boot id and pid namespace,
`flowmap.read.identity`: two containers whose processes are both pid 1, even
under one hostname, are two hosts, each aligned on its own), so shards collected from other machines are put on the timeline
of one reference host (the host of the earliest shard) through the wall
clock each header also records: a foreign shard's `t0_mono_ns` is rewritten
to `t0_wall_ns - (wall - monotonic offset of the reference host)`. Event
lines are copied byte for byte (their times are relative to `t0_mono_ns`);
the header keeps the original value under `clock`. Alignment is as good as
the hosts' wall clocks (NTP: typically well under a millisecond).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from flowmap import trace_format as tf
from flowmap.errors import UsageError
from flowmap.read.identity import HostKey, host_key, host_labels, process_key
from flowmap.read.plain import clean_text
from flowmap.read.reader import MAX_HEADER, open_regular
from flowmap.read.run_meta import read_run_meta
from flowmap.read.shards import shard_paths
from flowmap.rundir import holds_shards


@dataclass(slots=True)
class MergeResult:
    out: str
    shards: int = 0
    hosts: list[str] = field(default_factory=list)
    aligned: int = 0  # shards moved onto the reference host's clock
    reference_host: str = ""
    skipped: list[str] = field(default_factory=list)  # shards left out, one sentence each


def merge_runs(sources: list[str], out: str) -> MergeResult:
    """Copy every shard of `sources` (run directories or shard files) into the run `out`."""
    if not sources:
        raise UsageError("give at least one run directory to merge")
    if holds_shards(out):
        raise UsageError(f"{out} already holds a run; merge into a new directory")
    try:
        return _merge(sources, out)
    except OSError as exc:
        raise UsageError(f"cannot merge into {clean_text(out)}: {exc.strerror or exc}") from None


def _merge(sources: list[str], out: str) -> MergeResult:
    shards = []
    skipped: list[str] = []
    source_of: list[int] = []
    for n, src in enumerate(sources):
        for p in shard_paths(src):
            try:
                shards.append((p, _header(p)))
                source_of.append(n)
            except UsageError as exc:  # an empty or foreign shard: reported, not fatal
                skipped.append(str(exc))
    if not shards:
        raise UsageError(skipped[0] if skipped else "no shards to merge")
    retagged = _tell_hosts_apart([h for _, h in shards], source_of)
    first = min(shards, key=lambda s: s[1]["t0_wall_ns"])[1]
    offsets: dict[HostKey, int] = {}  # each host's wall - monotonic clock offset
    for _, h in sorted(shards, key=lambda s: s[1]["t0_wall_ns"]):
        offsets.setdefault(host_key(h), h["t0_wall_ns"] - h["t0_mono_ns"])
    reference = host_key(first)
    labels = host_labels([h for _, h in shards])
    result = MergeResult(out, reference_host=labels[reference],
                         hosts=sorted(labels[k] for k in offsets), skipped=skipped)
    os.makedirs(out, exist_ok=True)
    taken: set[str] = set()
    for i, (path, header) in enumerate(shards):
        name = os.path.basename(path)
        if name in taken:
            name = f"{i}-{name}"
        taken.add(name)
        dest = os.path.join(out, name)
        if host_key(header) != reference:
            _copy_aligned(path, dest, header, offsets[reference])
            result.aligned += 1
        elif i in retagged:
            _copy_with_header(path, dest, header)
        else:
            with open_regular(path) as fin, open(dest, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        result.shards += 1
    _write_meta(sources, out, result)
    return result


def _header(path: str) -> dict[str, Any]:
    with open_regular(path) as f:
        line = f.readline(MAX_HEADER + 1)
    try:
        header = json.loads(line) if len(line) <= MAX_HEADER else None
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get(tf.HEADER) != tf.MAGIC:
        raise UsageError(f"{clean_text(path)} is not a flowmap shard")
    for key in ("t0_wall_ns", "t0_mono_ns"):
        v = header.get(key)
        header[key] = v if type(v) is int and abs(v) < (1 << 63) else 0
    header["host"] = clean_text(str(header.get("host", ""))[:4096])
    return header


def _tell_hosts_apart(headers: list[dict[str, Any]], source_of: list[int]) -> set[int]:
    """Tag (`host_tag`) the shards of a host that two sources both hold with one pid: one
    host cannot have run two processes of one pid in two runs being merged (a header copied
    and edited, or hosts alike in every name: same hostname, same kernel, no pid namespace).
    The first source keeps the host's name; the others are hosts of their own. Returns the
    indexes of the headers tagged."""
    sources: dict[tuple[HostKey, int], set[int]] = {}
    for h, n in zip(headers, source_of):
        sources.setdefault((host_key(h), process_key(h)[1]), set()).add(n)
    split = {(key, n) for (key, _), ns in sources.items() if len(ns) > 1 for n in sorted(ns)[1:]}
    tagged = set()
    for i, (h, n) in enumerate(zip(headers, source_of)):
        if (host_key(h), n) in split:
            h["host_tag"] = f"source{n + 1}"
            tagged.add(i)
    return tagged


def _copy_aligned(src: str, dest: str, header: dict[str, Any], reference_offset_ns: int) -> None:
    aligned = dict(header)
    aligned["t0_mono_ns"] = header["t0_wall_ns"] - reference_offset_ns
    aligned["clock"] = {"source_t0_mono_ns": header["t0_mono_ns"], "aligned_by": "wall"}
    _copy_with_header(src, dest, aligned)


def _copy_with_header(src: str, dest: str, header: dict[str, Any]) -> None:
    with open_regular(src) as fin, open(dest, "wb") as fout:
        fin.readline()
        fout.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        shutil.copyfileobj(fin, fout)


def _write_meta(sources: list[str], out: str, result: MergeResult) -> None:
    meta: dict[str, Any] = {}
    for src in sources:
        path = os.path.join(src, tf.RUN_META)
        if os.path.isdir(src) and os.path.isfile(path):
            meta = read_run_meta(path)
            break
    meta.update({
        "flowmap": "run",
        "schema": tf.SCHEMA_VERSION,
        "merged_from": [os.path.abspath(s) for s in sources],
        "clock_reference_host": result.reference_host,
        "hosts": result.hosts,
    })
    with open(os.path.join(out, tf.RUN_META), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")


def repeated_shard(sources: list[str]) -> str | None:
    """A sentence naming a shard given twice (same host, pid and start), or None.

    Merging a run with itself (or with a copy of itself) would double every hop
    silently; the shard header identifies a process's recording wherever it lies.
    """
    seen: dict[tuple[str, int, int, int, str], str] = {}
    for src in sources:
        for p in shard_paths(src):
            try:
                h = _header(p)
            except UsageError:
                continue  # not a shard: merge_runs says so
            key = (h["host"], int(h.get("pid") or 0), h["t0_mono_ns"], h["t0_wall_ns"],
                   str(h.get("run_process") or ""))
            if key in seen:
                return (f"{p} is the same recording as {seen[key]} (host {h['host']}, pid {key[1]}); "
                        "give each run once")
            seen[key] = p
    return None
