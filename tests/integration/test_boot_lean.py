"""A traced child's start-up imports what arming needs; the rest loads when it is used.

Every Python child of a traced run runs the boot module, so what it imports
is paid by each child, hop or not (a multiprocessing resource tracker never
hops). These tests pin that the describers, multiprocessing and inspect wait
until used, and that what they were deferred for still happens when they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from flowmap.capture.session import child_environment
from flowmap.read.shards import shard_paths


def _child(tmp_path, code: str) -> dict[str, object]:
    env = child_environment(str(tmp_path / "run"))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not out.stderr, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_boot_arms_capture_without_the_describers_or_multiprocessing(tmp_path) -> None:
    got = _child(tmp_path, """
        import json, sys
        from flowmap.capture import state
        print(json.dumps({"tracing": state.tracer is not None,
                          "loaded": sorted(m for m in ("flowmap.capture.describers", "multiprocessing",
                                                       "multiprocessing.util", "inspect", "importlib.abc",
                                                       "uuid") if m in sys.modules)}))
    """)
    assert got == {"tracing": True, "loaded": []}


def test_what_was_deferred_happens_when_used(tmp_path) -> None:
    got = _child(tmp_path, """
        import json
        import multiprocessing.util as mp_util
        import flowmap
        from flowmap.capture import session

        closing = [f for f in mp_util._finalizer_registry.values()
                   if getattr(f, "_callback", None) is session.stop]
        flowmap.hop("child", "main", {"x": [1, 2, 3]}, name="first")
        print(json.dumps({"finalizers": len(closing)}))
    """)
    assert got == {"finalizers": 1}
    [shard] = shard_paths(str(tmp_path / "run"))
    with open(shard, encoding="utf-8") as f:
        kinds = [json.loads(line)[0] for line in f if line.startswith("[")]
    assert "h" in kinds
    assert os.path.getsize(shard) > 0


def test_importing_torch_arms_the_transports_without_the_describers(tmp_path) -> None:
    got = _child(tmp_path, """
        import json, sys
        import torch, torch.multiprocessing
        print(json.dumps({m: m in sys.modules for m in (
            "flowmap.integrations.transports.dist", "flowmap.integrations.transports.mp",
            "flowmap.capture.describers")}))
    """)
    assert got == {"flowmap.integrations.transports.dist": True,
                   "flowmap.integrations.transports.mp": True,
                   "flowmap.capture.describers": False}


def test_multiprocessings_resource_tracker_is_not_traced(tmp_path) -> None:
    # GIVEN a traced child that starts the resource tracker (every spawn or semaphore does)
    got = _child(tmp_path, """
        import json
        from multiprocessing import resource_tracker
        import flowmap

        resource_tracker.ensure_running()
        flowmap.hop("child", "main", [1, 2], name="n")
        print(json.dumps({"tracker": resource_tracker._resource_tracker._pid}))
    """)
    # THEN the tracker, which never runs the program's code, leaves no shard and no cost;
    # the child that started it has its own
    tracker = got["tracker"]
    assert isinstance(tracker, int) and tracker > 0
    shards = shard_paths(str(tmp_path / "run"))
    assert len(shards) == 1 and f"-{tracker}-" not in os.path.basename(shards[0])
