"""The device-bounce finding: a tensor copied device → host → device within one step.

On hand-built runs whose leaves name a device (`cuda:0`, as a GPU run records
it), and on a traced program whose device tensors are `meta` tensors (the CPU
has no other device); each with its controls, the fix applied, which must
stay silent.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from runs import ShardWriter, tensor

import flowmap
from flowmap.findings import DEVICE_BOUNCE, KINDS, device_bounce, findings

SHAPE = (64, 128)
NBYTES = 64 * 128 * 4


def _view(tmp_path: Path, hops: list[tuple], steps: int = 2):
    """A one-process run of `(src, dst, name, device, storage, step[, field])` hops, a float32
    (64, 128) each, its field `log_probs` unless given."""
    os.makedirs(tmp_path / "run", exist_ok=True)
    w = ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)
    for t, (src, dst, name, device, storage, step, *field) in enumerate(hops):
        w.hop(t + 1, src, dst, name, [tensor(field[0] if field else "log_probs", SHAPE,
                                             device=device)],
              storages=(storage,), step=step, transport="pickle" if device == "cpu" else "ref")
    w.close(10**6)
    return flowmap.load(str(tmp_path / "run")).view


def _bounce(step: int, base: int = 0) -> list[tuple]:
    """actor's device log-probs; driver sends a host copy to ref; ref sends it on, on the device."""
    return [("actor", "driver", "log_probs", "cuda:0", base + 1, step),
            ("driver", "ref", "batch", "cpu", base + 2, step),
            ("ref", "trainer", "kl_inputs", "cuda:0", base + 3, step)]


def test_the_kind_is_registered():
    assert DEVICE_BOUNCE == "device_bounce" and DEVICE_BOUNCE in KINDS


def test_a_bounce_in_every_step_is_found_with_both_copies_at_stake(tmp_path):
    view = _view(tmp_path, _bounce(0) + _bounce(1, 10))
    (f,) = [f for f in findings(view) if f.kind == DEVICE_BOUNCE]
    assert f.bytes_per_step == 2 * NBYTES  # down and back up, each step
    assert f.seams == ["actor -> driver : log_probs", "driver -> ref : batch",
                       "ref -> trainer : kl_inputs"]
    assert "`batch.log_probs`" in f.message and "cuda:0" in f.message
    assert f.message.count(". ") == 0 and f.message.endswith(".")


def test_the_fix_applied_keeps_it_on_the_device_and_nothing_is_found(tmp_path):
    # control: the same hops, the middle one handing over the device tensor (CUDA IPC, say)
    hops = [(s, d, n, "cuda:0", st, step) for (s, d, n, _, st, step) in _bounce(0) + _bounce(1, 10)]
    assert device_bounce.detect(_view(tmp_path, hops)) == []


def test_forwarding_the_original_device_storage_is_no_bounce(tmp_path):
    # ref got a host copy, but what it sends on is the device storage actor made (storage 1)
    hops = [("actor", "driver", "log_probs", "cuda:0", 1, 0),
            ("driver", "ref", "batch", "cpu", 2, 0),
            ("driver", "ref", "batch_on_device", "cuda:0", 1, 0),
            ("ref", "trainer", "kl_inputs", "cuda:0", 1, 0)]
    assert device_bounce.detect(_view(tmp_path, hops, 1)) == []


def test_same_shapes_that_never_pass_hands_are_no_bounce(tmp_path):
    hops = [("actor", "driver", "log_probs", "cuda:0", 1, 0),
            ("logger", "ref", "batch", "cpu", 2, 0),          # not from the device's holder
            ("ref", "trainer", "kl_inputs", "cuda:0", 3, 0),
            ("actor", "driver", "log_probs", "cuda:0", 4, 1),  # down in step 1, up in step 2
            ("driver", "ref", "batch", "cpu", 5, 1),
            ("ref", "trainer", "kl_inputs", "cuda:0", 6, 2)]
    assert device_bounce.detect(_view(tmp_path, hops, 3)) == []


def test_a_new_tensor_of_the_same_shape_is_no_copy_back(tmp_path):
    # ref got a host copy of the log-probs and sends its own reference log-probs on the device
    hops = [("actor", "driver", "log_probs", "cuda:0", 1, 0),
            ("driver", "ref", "batch", "cpu", 2, 0),
            ("ref", "trainer", "ref_out", "cuda:0", 3, 0, "ref_log_probs")]
    assert device_bounce.detect(_view(tmp_path, hops, 1)) == []
    # the same chain, the field's name kept: found (its path within a larger payload)
    hops[2] = ("ref", "trainer", "ref_out", "cuda:0", 3, 0, "inputs.log_probs")
    (f,) = device_bounce.detect(_view(tmp_path / "kept", hops, 1))
    assert f.bytes_per_step == 2 * NBYTES


def test_a_host_copy_sent_up_by_someone_else_is_not_the_receivers_bounce(tmp_path):
    # the host copy reaches ref, but the device tensor after it comes out of `trainer`
    hops = [("actor", "driver", "log_probs", "cuda:0", 1, 0),
            ("driver", "ref", "batch", "cpu", 2, 0),
            ("trainer", "ref", "kl_inputs", "cuda:0", 3, 0)]
    assert device_bounce.detect(_view(tmp_path, hops, 1)) == []


PROGRAM = textwrap.dedent("""
    import torch
    import flowmap

    BOUNCE = {bounce}
    for step in range(3):
        flowmap.step(step)
        lp = torch.empty(64, 128, device="meta")  # the device tensor (a GPU's, on a GPU)
        flowmap.hop("actor", "driver", {{"log_probs": lp}}, name="log_probs")
        host = torch.empty(64, 128) if BOUNCE else lp  # lp.cpu() on a GPU; the fix keeps lp
        flowmap.hop("driver", "ref", {{"log_probs": host}}, name="batch")
        back = torch.empty(64, 128, device="meta") if BOUNCE else lp  # host.cuda()
        flowmap.hop("ref", "trainer", {{"log_probs": back}}, name="kl_inputs")
""")


def _traced(tmp_path: Path, run_cli, bounce: bool):
    (tmp_path / "prog.py").write_text(PROGRAM.format(bounce=bounce))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "prog.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return flowmap.load(str(tmp_path / "run")).view


def test_a_traced_bounce_of_meta_tensors_is_found(tmp_path, run_cli):
    view = _traced(tmp_path, run_cli, True)
    devices = {h.name: h.leaves[0].device for h in view.events.hops}
    assert devices == {"log_probs": "meta", "batch": "cpu", "kl_inputs": "meta"}
    (f,) = device_bounce.detect(view)
    assert f.bytes_per_step == 2 * NBYTES and "meta" in f.message


def test_a_traced_run_that_keeps_the_tensor_on_the_device_has_none(tmp_path, run_cli):
    view = _traced(tmp_path, run_cli, False)
    assert {h.leaves[0].device for h in view.events.hops} == {"meta"}
    assert device_bounce.detect(view) == []
