"""A storage sent through shared memory moves once a step; through pickle, once a message.

torch.multiprocessing's reducers move a CPU tensor's storage into shared memory
the first time it is sent and pass handles after, so the same storage sent on
two queues (or twice) in one step is copied once; a pickled array is written
into every message that carries it. Real torch.multiprocessing queues and a
spawned receiver, traced end to end; the seam's bytes are read from the run.
"""

from __future__ import annotations

import textwrap
from multiprocessing.reduction import ForkingPickler

import pytest

import flowmap

N, STEPS = 1000, 3  # float32 elements of the tensor sent each step


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def test_one_shared_storage_is_priced_once_a_step_pickle_once_a_message(tmp_path, run_cli):
    pytest.importorskip("torch")
    pytest.importorskip("numpy")
    # GIVEN each step: a fresh tensor put on two torch queues, and a view of it that starts
    # where it does; a weight tensor already in shared memory put on both queues, read-only;
    # and a numpy array pickled onto a plain Pipe twice
    script = write(tmp_path / "prog.py", f'''
        import multiprocessing as mp
        import numpy as np, torch, torch.multiprocessing as tmp, flowmap

        def learner(a, b, rx, done):
            flowmap.set_owner("learner")
            for step in range({STEPS}):
                flowmap.step(step)
                for q in (a, b, a, b):
                    q.get()
                rx.recv(); rx.recv()
            done.put(1)

        if __name__ == "__main__":
            ctx = tmp.get_context("spawn")
            a, b, done = ctx.Queue(), ctx.Queue(), ctx.Queue()
            rx, tx = mp.Pipe(False)
            p = ctx.Process(target=learner, args=(a, b, rx, done)); p.start()
            flowmap.set_owner("rollout")
            weights = torch.randn(2 * {N}).share_memory_()
            arr = np.ones({N}, dtype=np.float32)
            for step in range({STEPS}):
                flowmap.step(step)
                x = torch.randn({N})
                a.put(x); b.put(x)  # one storage, two queues
                a.put(x[: {N} // 2])  # a view of it: the same storage again
                b.put(weights)  # shared already, sent read-only
                tx.send(arr); tx.send(arr)  # pickled: each message carries it
            done.get(); p.join(); assert p.exitcode == 0
    ''')
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    tensor = run.seams[("rollout", "learner", "Tensor")]
    array = run.seams[("rollout", "learner", "ndarray")]
    # THEN the torch queues carry each storage once a step: the fresh tensor's 4 KB however
    # many views of it went, and the shared weights' 8 KB once
    assert tensor.hops == 4 * STEPS and set(tensor.transports) == {"shm"}
    assert tensor.bytes_per_step_mean == N * 4 + 2 * N * 4
    # AND the pickled array is in each of its messages
    assert array.hops == 2 * STEPS and set(array.transports) == {"pickle"}
    import numpy as np

    one = len(ForkingPickler.dumps(np.ones(N, dtype=np.float32)))
    assert one > N * 4 and array.bytes_per_step_mean == 2 * one
