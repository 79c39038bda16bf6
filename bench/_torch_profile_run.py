"""Run a script under torch.profiler as a user would wrap a training job.

bench_peers.py uses this: torch.profiler has no command-line runner, so this
wraps `runpy.run_path` in `profile(record_shapes=True, profile_memory=True)`
and writes the driver's Chrome trace. Spawned ranks re-import the script as
`__mp_main__`, never this wrapper: bench/_peer_boot wraps each of them the
same way, so the whole tree is profiled, as for the other tools.

Usage: python bench/_torch_profile_run.py OUT.json SCRIPT [ARGS...]
"""

from __future__ import annotations

import runpy
import sys

from torch.profiler import ProfilerActivity, profile


def main() -> int:
    out, script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    code = 0
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 profile_memory=True) as prof:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    prof.export_chrome_trace(out)
    return code


if __name__ == "__main__":
    sys.exit(main())
