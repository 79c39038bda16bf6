"""What capturing `queue.Queue` hand-offs costs (`flowmap/integrations/transports/thread_queue.py`).

Times a put and the get of it on one `queue.Queue`, in one thread (so no thread
switch is timed), best of several repeats, per put+get:

- untraced;
- traced, put and got by one owner: a note at the put, its look-up at the get, no hop;
- traced, put by one owner and got by another (`flowmap.owner` blocks): the hop
  `flowmap.hop` would record, of a dict of one small tensor;
- the same on an `asyncio.Queue` (`await q.put(x); await q.get()` in one task), untraced
  and traced with one owner.

Run: python bench/bench_queue.py [--messages 5000] [--repeats 7]   (a few seconds)
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import tempfile
import timeit

import torch

import flowmap

PAYLOAD = {"tokens": torch.zeros(4, 8, dtype=torch.int64)}


def _timed(fn: object, n: int, repeats: int) -> float:
    fn()  # type: ignore[operator]
    return min(timeit.repeat(fn, number=n, repeat=repeats)) / n * 1e6  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    q: queue.Queue[object] = queue.Queue()

    def same_owner() -> None:
        q.put(PAYLOAD)
        q.get()

    def two_owners() -> None:
        with flowmap.owner("rollout"):
            q.put(PAYLOAD)
        with flowmap.owner("trainer"):
            q.get()

    def owner_blocks() -> None:  # the two blocks alone, to take out of the figure above
        with flowmap.owner("rollout"):
            pass
        with flowmap.owner("trainer"):
            pass

    plain = _timed(same_owner, args.messages, args.repeats)
    aio_plain = _awaited(args.messages, args.repeats)  # before tracing wraps the queues
    with tempfile.TemporaryDirectory() as d, flowmap.tracing(d):
        noted = _timed(same_owner, args.messages, args.repeats)
        hop = _timed(two_owners, args.messages, args.repeats) - \
            _timed(owner_blocks, args.messages, args.repeats)
    with tempfile.TemporaryDirectory() as d, flowmap.tracing(d):
        aio_noted = _awaited(args.messages, args.repeats)
    print(f"{'untraced':>32}: {plain:.2f} µs a put and get")
    print(f"{'traced, one owner (no hop)':>32}: {noted:.2f} µs")
    print(f"{'traced, two owners (a hop)':>32}: {hop:.2f} µs")
    print(f"{'asyncio.Queue, untraced':>32}: {aio_plain:.2f} µs")
    print(f"{'asyncio.Queue, traced, one owner':>32}: {aio_noted:.2f} µs")


def _awaited(n: int, repeats: int) -> float:
    """Best µs per awaited put and get on one asyncio.Queue, in one task."""
    async def loop() -> float:
        q: asyncio.Queue[object] = asyncio.Queue()
        start = timeit.default_timer()
        for _ in range(n):
            await q.put(PAYLOAD)
            await q.get()
        return (timeit.default_timer() - start) / n * 1e6

    return min(asyncio.run(loop()) for _ in range(repeats))


if __name__ == "__main__":
    main()
