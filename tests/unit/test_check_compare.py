"""Baseline rules on hand-built snapshots: what fails, what is only reported, and the words used."""

from __future__ import annotations

from dataclasses import replace

from flowmap.check.compare import compare
from flowmap.check.snapshot import LeafShot, SeamShot, Snapshot

BATCH = "batcher -> trainer/rank0 : batch"


def leaf(path: str, dtype: str = "float32", shape=(8, 16), itemsize: int = 4, kind: str = "ndarray",
         dims=None) -> LeafShot:
    n = itemsize
    for d in shape:
        n *= d
    return LeafShot(path, kind, dtype, list(shape), dims, n, n)


def seam(leaves: list[LeafShot], src="batcher", dst="trainer/rank0", name="batch", hops=1.0) -> SeamShot:
    per_hop = sum(x.bytes_per_hop for x in leaves)
    return SeamShot(src, dst, name, int(per_hop * hops), per_hop, per_hop, hops, ["ref"],
                    {x.path: x for x in leaves})


def snap(*seams: SeamShot) -> Snapshot:
    return Snapshot(steps=4, seams={s.label: s for s in seams})


BASE = snap(seam([leaf("tokens", "int64", itemsize=8, dims=["B", "T"]), leaf("advantages")]))


def by_subject(results):
    return {r.subject: r for r in results}


def test_identical_snapshot_passes():
    results = compare(BASE, BASE, tolerance=0.1)
    assert [r.status for r in results] == ["ok"]


def test_widened_dtype_fails_and_names_the_leaf():
    # GIVEN advantages widened from float32 to float64 (+512 B on a 1.5 KiB seam: +33 %)
    cur = snap(seam([leaf("tokens", "int64", itemsize=8, dims=["B", "T"]),
                     leaf("advantages", "float64", itemsize=8)]))
    # WHEN compared with a tolerance that would absorb the seam's growth
    r = by_subject(compare(cur, BASE, tolerance=0.5))[BATCH]
    # THEN the widened dtype alone fails it, in words
    assert r.status == "fail"
    assert "batch.advantages float32 -> float64, +100 %" in r.details


def test_narrowed_dtype_is_an_improvement():
    cur = snap(seam([leaf("tokens", "int32", itemsize=4, dims=["B", "T"]), leaf("advantages")]))
    r = by_subject(compare(cur, BASE, tolerance=0.1, min_bytes_per_step=0))[BATCH]
    assert r.status == "improved"
    assert r.details == ["batch.tokens int64 -> int32, -50 %"]


def test_added_array_leaf_fails_even_when_tiny():
    cur = snap(seam([*BASE.seams[BATCH].leaves.values(),
                     leaf("routed_experts", "int32", shape=(2, 2))]))
    r = by_subject(compare(cur, BASE, tolerance=0.1))[BATCH]
    assert r.status == "fail"
    assert r.details == ["batch.routed_experts added: int32 [2, 2], 16 B/hop"]


def test_added_small_scalar_leaf_is_reported_not_failed():
    cur = snap(seam([*BASE.seams[BATCH].leaves.values(),
                     LeafShot("step", "int", "", [], None, 8, 8)]))
    r = by_subject(compare(cur, BASE, tolerance=0.1))[BATCH]
    assert r.status == "ok"
    assert r.details == ["batch.step added: int, 8 B/hop"]


def test_doubled_dimension_fails_with_named_dims():
    cur = snap(seam([leaf("tokens", "int64", shape=(8, 32), itemsize=8, dims=["B", "T"]),
                     leaf("advantages")]))
    r = by_subject(compare(cur, BASE, tolerance=0.1))[BATCH]
    assert r.status == "fail"
    assert "batch.tokens [B=8, T=16] -> [B=8, T=32], +100 %" in r.details
    assert r.summary.startswith("bytes/step 1.50 KiB -> 2.50 KiB (+67 %")


def test_new_seam_above_floor_fails_below_is_reported():
    big = seam([leaf("payload", "uint8", shape=(4096,), itemsize=1)], src="driver", name="replay")
    small = seam([leaf("ids", "int64", shape=(4,), itemsize=8)], src="driver", name="meta")
    results = by_subject(compare(snap(*BASE.seams.values(), big, small), BASE, tolerance=0.1))
    assert results[big.label].status == "fail"
    assert "new seam carrying 4.00 KiB/step" in results[big.label].summary
    assert results[big.label].details == ["replay.payload added: uint8 [4096], 4.00 KiB/hop"]
    assert results[small.label].status == "new"


def test_gone_seam_is_reported_not_failed():
    results = compare(snap(), BASE, tolerance=0.1)
    assert [(r.subject, r.status) for r in results] == [(BATCH, "gone")]
    assert not any(r.failed for r in results)


def test_tolerance_boundary():
    base = snap(seam([LeafShot("x", "bytes", "", [1000], None, 1000, 1000)]))
    grown = {n: snap(seam([LeafShot("x", "bytes", "", [n], None, n, n)])) for n in (1090, 1110)}
    assert compare(grown[1090], base, tolerance=0.1, min_bytes_per_step=0)[0].status == "ok"
    assert compare(grown[1110], base, tolerance=0.1, min_bytes_per_step=0)[0].status == "fail"


def test_growth_below_the_floor_is_noise():
    # GIVEN a 3 KiB/step control seam that wobbles +17 % between two runs of an async pipeline
    base = snap(seam([LeafShot("ids[*]", "int", "", [[5, 13]], None, 3000, 3000)], name="paused"))
    cur = snap(seam([LeafShot("ids[*]", "int", "", [[5, 14]], None, 3500, 3500)], name="paused"))
    # THEN +500 B/step stays under the 1 KiB floor: reported, not failed
    r = compare(cur, base, tolerance=0.1)[0]
    assert r.status == "ok"
    assert r.details == ["paused.ids[*] [5..13] -> [5..14], +17 %"]
    assert compare(cur, base, tolerance=0.1, min_bytes_per_step=256)[0].status == "fail"


def test_more_hops_per_step_is_explained():
    s = BASE.seams[BATCH]
    cur = snap(replace(s, hops_per_step=2.0, bytes_per_step=2 * s.bytes_per_step))
    r = compare(cur, BASE, tolerance=0.1)[0]
    assert r.status == "fail"
    assert "hops/step 1 -> 2" in r.details


def test_results_sorted_by_absolute_change():
    other = seam([leaf("a", shape=(10,))], src="x", dst="y", name="z")
    grown_other = seam([leaf("a", shape=(1000,))], src="x", dst="y", name="z")
    results = compare(snap(BASE.seams[BATCH], grown_other), snap(BASE.seams[BATCH], other), 0.1)
    assert [r.subject for r in results] == ["x -> y : z", BATCH]


def test_per_seam_tolerance():
    other = seam([leaf("a", shape=(1000,))], src="rollout/0", dst="weight_sync", name="paused")
    grown = seam([leaf("a", shape=(1800,))], src="rollout/0", dst="weight_sync", name="paused")
    base, cur = snap(BASE.seams[BATCH], other), snap(BASE.seams[BATCH], grown)
    assert by_subject(compare(cur, base, 0.1))[other.label].status == "fail"

    def wide(src, dst, name):
        return 1.0 if name == "paused" else None

    r = by_subject(compare(cur, base, 0.1, tolerance_for=wide))[other.label]
    assert r.status == "ok"
    assert r.summary.endswith("limit 7.81 KiB, tolerance 100 %)")
