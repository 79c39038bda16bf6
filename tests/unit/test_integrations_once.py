"""An integration patches a class once, however often the hooks are armed.

Each `tracing()` block (and each `flowmap trace`'s start) arms the hooks again; an
integration whose install ran twice would wrap its class twice and record each call twice.
"""

from __future__ import annotations

import multiprocessing.process as mp_process

import flowmap
from flowmap.integrations import processes


def test_two_tracing_blocks_wrap_multiprocessing_once(tmp_path):
    with flowmap.tracing(str(tmp_path / "a")):
        pass
    start = mp_process.BaseProcess.start
    with flowmap.tracing(str(tmp_path / "b")):
        processes.install(mp_process)  # and once more, by hand
    assert mp_process.BaseProcess.start is start
    assert start.__code__.co_name == "flowmap_start"  # flowmap's wrapper ...
    assert start.__wrapped__.__code__.co_name == "start"  # ... of the library's own, once
