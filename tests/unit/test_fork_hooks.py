"""flowmap's fork hooks never swallow the program's Ctrl-C (flowmap/capture/forksafe.py).

A SIGINT that arrives during `fork()` runs its handler at the first Python instruction
after it, which may be one of the hooks `os.register_at_fork` runs; CPython prints what a
hook raises and goes on, so a KeyboardInterrupt raised there would be lost.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    import os, sys, time
    from flowmap.capture import forksafe

    def hook():  # interrupted by Ctrl-C, once, as a signal landing in it would be
        if not getattr(hook, "fired", False):
            hook.fired = True
            raise KeyboardInterrupt

    register = forksafe.at_fork if sys.argv[1] == "flowmap" else os.register_at_fork
    register(after_in_parent=hook)
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        for _ in range(400):  # the program's next steps, for two seconds at most
            time.sleep(0.005)
        print("lost")
    except KeyboardInterrupt:
        print("interrupted")
    os.waitpid(pid, 0)
''')


def _run(register: str) -> str:
    r = subprocess.run([sys.executable, "-c", PROGRAM, register], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_ctrl_c_landing_in_a_fork_hook_reaches_the_program():
    assert _run("os") == "lost"  # what CPython does with a hook's exception
    assert _run("flowmap") == "interrupted"



def test_an_owner_block_in_a_forked_child_opens_no_shard_of_its_own(tmp_path):
    # GIVEN a traced parent whose forked child only runs an owner block and leaves (as a
    # child forked to exec another program runs the at-fork hooks and little else)
    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import os, flowmap
        with flowmap.tracing({str(run)!r}):
            flowmap.hop("a", "b", [1, 2], name="x")
            pid = os.fork()
            if pid == 0:
                with flowmap.owner("child"):
                    pass
                os._exit(0)
            os.waitpid(pid, 0)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    # THEN the run has the parent's shard only: noting that the block ran opened nothing
    assert len(list(run.glob("*.jsonl"))) == 1, sorted(p.name for p in run.iterdir())
