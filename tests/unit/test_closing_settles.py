"""A process closes its shard only once the sends its other threads have in flight are
recorded (flowmap/capture/sigterm.py `settle`, called by `session.stop`): a DataLoader
worker that ends without joining its queue's feeder thread would otherwise lose the record
of a message its receiver got.
"""

from __future__ import annotations


def test_closing_waits_for_a_send_another_thread_has_in_flight():
    # GIVEN a feeder thread between sending a message and recording it
    import threading
    import time

    from flowmap.capture import sigterm

    started, done = threading.Event(), []

    def feeder() -> None:
        sigterm.hold()
        started.set()
        time.sleep(0.1)
        done.append(True)  # recorded
        sigterm.release()

    t = threading.Thread(target=feeder)
    t.start()
    started.wait()
    # WHEN the process settles before closing its shard
    t0 = time.monotonic()
    sigterm.settle()
    # THEN it waited for the record, and no longer than the send took
    assert done and time.monotonic() - t0 < sigterm.GIVE_UP_S
    t.join()


def test_closing_gives_up_on_a_send_that_never_ends():
    import threading
    import time

    from flowmap.capture import sigterm

    stuck, go = threading.Event(), threading.Event()

    def feeder() -> None:
        sigterm.hold()
        stuck.set()
        go.wait(5)
        sigterm.release()

    t = threading.Thread(target=feeder)
    t.start()
    stuck.wait()
    t0 = time.monotonic()
    sigterm.settle(timeout=0.2)
    assert 0.2 <= time.monotonic() - t0 < 1.0
    go.set()
    t.join()
