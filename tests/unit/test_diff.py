"""`diff`: every seam of A and B, sorted by absolute change, with leaf-level differences."""

from __future__ import annotations

import json

from flowmap.check.diff import diff_snapshots
from flowmap.check.snapshot import LeafShot, SeamShot, Snapshot
from flowmap.reporters.check_formats import diff_renderer


def seam(src, dst, name, leaves, hops=1.0, transports=("ref",)):
    per_hop = sum(x.bytes_per_hop for x in leaves)
    return SeamShot(src, dst, name, int(per_hop * hops), per_hop, per_hop, hops, list(transports),
                    {x.path: x for x in leaves})


def arr(path, dtype, shape, itemsize, dims=None):
    n = itemsize
    for d in shape:
        n *= d if isinstance(d, int) else d[1]
    return LeafShot(path, "ndarray", dtype, list(shape), dims, n, n)


def snap(*seams):
    return Snapshot(steps=2, seams={s.label: s for s in seams})


A = snap(
    seam("rollout/0", "ready_buffer", "trajectory", [arr("logprobs", "float32", [[10, 256]], 4)]),
    seam("driver", "trainer/rank0", "batch", [arr("routed_experts", "int32", [64, 4, 2], 4, ["tokens", "layers", "topk"]),
                                             arr("tokens", "int64", [64], 8)]),
    seam("driver", "rollout/0", "weights", [arr("w", "float32", [256], 4)]),
)
B = snap(
    seam("rollout/0", "ready_buffer", "trajectory", [arr("logprobs", "float32", [[10, 256]], 4)]),
    seam("driver", "trainer/rank0", "batch", [arr("tokens", "int64", [64], 8)]),
    seam("driver", "trainer/rank0", "handle", [arr("ref", "uint8", [16], 1)], transports=("shm",)),
)


def test_sorted_by_absolute_change():
    deltas = diff_snapshots(A, B)
    assert [(d.label, d.delta_bytes_per_step) for d in deltas] == [
        ("driver -> trainer/rank0 : batch", -2048),
        ("driver -> rollout/0 : weights", -1024),
        ("driver -> trainer/rank0 : handle", 16),
        ("rollout/0 -> ready_buffer : trajectory", 0),
    ]
    assert [d.status for d in deltas] == ["changed", "gone", "new", "same"]


def test_text_table():
    out = diff_renderer("text")(diff_snapshots(A, B), "runs/a", "runs/b")
    assert out == (
        "flowmap diff: A = runs/a\n"
        "              B = runs/b\n"
        "\n"
        "seam                                      A/step    B/step      delta  ratio\n"
        "driver -> trainer/rank0 : batch         2.50 KiB     512 B  -2.00 KiB  0.20x\n"
        "    batch.routed_experts removed (was int32 [tokens=64, layers=4, topk=2], 2.00 KiB/hop)\n"
        "driver -> rollout/0 : weights           1.00 KiB         -  -1.00 KiB   gone\n"
        "driver -> trainer/rank0 : handle               -      16 B      +16 B    new\n"
        "rollout/0 -> ready_buffer : trajectory  1.00 KiB  1.00 KiB        0 B  1.00x\n"
    )


def test_markdown_table():
    out = diff_renderer("markdown")(diff_snapshots(A, B), "a", "b")
    assert "| Seam | A / step | B / step | Δ / step | B / A |" in out
    assert "| `driver -> trainer/rank0 : batch` | 2.50 KiB | 512 B | -2.00 KiB | 0.20x |" in out
    assert "  - `batch.routed_experts removed (was int32 [tokens=64, layers=4, topk=2], 2.00 KiB/hop)`" in out


def test_json_document():
    doc = json.loads(diff_renderer("json")(diff_snapshots(A, B), "a", "b"))
    first = doc["seams"][0]
    assert first["seam"] == "driver -> trainer/rank0 : batch"
    assert first["a_bytes_per_step"] == 2560 and first["b_bytes_per_step"] == 512
    assert first["ratio"] == 0.2
    assert first["leaves"][0]["leaf"] == "batch.routed_experts"
    assert doc["seams"][2]["ratio"] is None  # a new seam has no ratio


def test_transport_and_hop_changes_are_noted():
    a = snap(seam("a", "b", "c", [arr("x", "float32", [4], 4)]))
    b = snap(seam("a", "b", "c", [arr("x", "float32", [4], 4)], hops=2.0, transports=("pickle",)))
    (d,) = diff_snapshots(a, b)
    assert d.notes() == ["hops/step 1 -> 2", "transport ref -> pickle"]
