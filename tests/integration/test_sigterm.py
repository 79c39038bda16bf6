"""SIGTERM ends a traced program as it ends an untraced one, with its shard closed.

flowmap's handler is Python's, which runs only in the main thread at a bytecode
or when a blocking call there is interrupted; and the transports hold SIGTERM
between a send and its record (`flowmap.capture.sigterm`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

import flowmap

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the refire is Linux's")


def trace(tmp_path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", str(tmp_path / "run"),
                           str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)


def died_of_sigterm(r: subprocess.CompletedProcess[str], tmp_path) -> list[str]:
    """The names of the hops of a run that ended as SIGTERM ends an untraced program, its
    shard closed."""
    assert r.returncode == -signal.SIGTERM, r.stderr[-2000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert not run.truncated
    return [h.name for h in run.hops]


def test_a_sigterm_no_blocking_call_sees_still_ends_the_program(tmp_path):
    # GIVEN the main thread asleep in a read nobody ends, and SIGTERM delivered to another
    # thread: Python notes it, and nothing wakes the main thread to run the handler (as when
    # it lands just before a Pool worker sleeps in `get`)
    r = trace(tmp_path, '''
        import os, signal, threading, time, flowmap
        flowmap.hop("a", "b", {"x": bytes(64)}, name="before")
        def poke():
            time.sleep(0.3)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        threading.Thread(target=poke, daemon=True).start()
        os.read(os.pipe()[0], 1)
    ''')
    # THEN it dies of SIGTERM, as untraced, and its shard is closed
    assert died_of_sigterm(r, tmp_path) == ["before"]


def test_a_sigterm_during_a_send_waits_for_its_record(tmp_path):
    # GIVEN SIGTERM arriving between a send and its record
    r = trace(tmp_path, '''
        import os, signal, flowmap
        from flowmap.capture import sigterm
        sigterm.hold()
        os.kill(os.getpid(), signal.SIGTERM)
        flowmap.hop("a", "b", {"x": bytes(64)}, name="recorded after the signal")
        sigterm.release()
        flowmap.hop("a", "b", {"x": bytes(64)}, name="never")
    ''')
    # THEN the record is kept, and the program ends as the send is done
    assert died_of_sigterm(r, tmp_path) == ["recorded after the signal"]


def test_a_send_that_never_ends_does_not_hold_the_program_past_its_sigterm(tmp_path):
    # GIVEN a send held for good (a write to a full pipe nobody reads)
    r = trace(tmp_path, '''
        import os, signal, time
        from flowmap.capture import sigterm
        sigterm.hold()
        os.kill(os.getpid(), signal.SIGTERM)
        r, w = os.pipe()
        os.set_blocking(w, True)
        while True:
            os.write(w, bytes(65536))
    ''')
    # THEN SIGTERM ends it all the same
    assert died_of_sigterm(r, tmp_path) == []


def test_a_forked_child_gets_the_same_care(tmp_path):
    # GIVEN a forked child (its timer is made anew: timers are not inherited) in the same
    # plight as above
    r = trace(tmp_path, '''
        import os, signal, sys, threading, time
        pid = os.fork()
        if pid == 0:
            def poke():
                time.sleep(0.3)
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            threading.Thread(target=poke, daemon=True).start()
            os.read(os.pipe()[0], 1)
            os._exit(0)
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                sys.exit("the child hung")
            time.sleep(0.05)
        if os.waitstatus_to_exitcode(status) != -signal.SIGTERM:
            sys.exit(f"the child ended with {os.waitstatus_to_exitcode(status)}")
    ''')
    # THEN the child dies of its SIGTERM and the program goes on to its end
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_forked_child_does_not_inherit_another_thread_s_hold(tmp_path):
    # GIVEN a fork while another thread of the parent is between a send and its record
    r = trace(tmp_path, '''
        import os, signal, sys, threading
        from flowmap.capture import sigterm
        held, done = threading.Event(), threading.Event()
        def sender():
            sigterm.hold()
            held.set()
            done.wait()
            sigterm.release()
        threading.Thread(target=sender).start()
        held.wait()
        pid = os.fork()
        if pid == 0:  # that thread is not in the child: nothing of the child's is held
            os.kill(os.getpid(), signal.SIGTERM)
            os._exit(3)  # not reached: handled at once, not after GIVE_UP_S
        status = os.waitpid(pid, 0)[1]
        done.set()
        sys.exit(0 if os.waitstatus_to_exitcode(status) == -signal.SIGTERM else "the child held on")
    ''')
    # THEN the child's SIGTERM is handled as it comes
    assert r.returncode == 0, r.stderr[-2000:]
