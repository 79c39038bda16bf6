"""What naming a hop's strings and floats costs (`flowmap/capture/text_identity.py`).

A hop of text or floats with no tensor gets a `t` line: a bounded walk for its first
strings and floats, an id each (held while the id is kept), and the line. This times
`flowmap.hop` of five payloads (8 prompts, 64 prompts, a dict of one float and one int,
a dict of one small tensor, which gets no `t` line, and one of a tensor beside 4 floats) under tracing, best of several repeats,
per hop. Run it on two trees to compare: `PYTHONPATH=OTHER python bench/bench_text_ids.py`.

Run: python bench/bench_text_ids.py [--hops 5000] [--repeats 7]   (a few seconds)
"""

from __future__ import annotations

import argparse
import tempfile
import timeit

import torch

import flowmap

PAYLOADS = {
    "8 prompts": [f"prompt number {i} " * 4 for i in range(8)],
    "64 prompts": [f"prompt number {i} " * 4 for i in range(64)],
    "a float and an int": {"loss": 0.5, "step": 2},
    "a tensor": {"x": torch.randn(4, 4)},
    "a tensor and 4 floats": {"x": torch.randn(4, 4), "scores": [0.25, 0.5, 0.75, 1.0]},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hops", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, flowmap.tracing(d):
        for name, payload in PAYLOADS.items():
            def hop(payload: object = payload, name: str = name) -> None:
                flowmap.hop("a", "b", payload, name=name)

            hop()
            best = min(timeit.repeat(hop, number=args.hops, repeat=args.repeats))
            print(f"{name:>20}: {best / args.hops * 1e6:.2f} µs a hop")


if __name__ == "__main__":
    main()
