"""Hidden states relayed as the very frames they arrived in, over ZMQ multipart.

A bridge between an inference engine and a trainer (a disaggregated rollout's
gateway, a router in front of several trainers): the engine sends each batch as
frames of its own encoding, a JSON header and the array's raw bytes
(`send_multipart([header, array.tobytes()])`), and the bridge forwards the frames it
received (`send_multipart(frames)`). No object the tracer could name crosses either
socket: the bridge's receipt names the frames' content by a 64-byte sample, and the
frames it sends that hold that sample carry the same name on
(`flowmap/integrations/transports/relay_bytes.py`). Annotated with `flowmap.owner`
and `flowmap.step` only. The fix: the engine sends to the trainer, and the bridge
gets a handle (`relay_frames_fixed.py`, where the bridge sends what it computed).

    flowmap trace examples/field/relay_frames.py && flowmap report
"""

from __future__ import annotations

import json
import multiprocessing as mp
from typing import Any

import numpy as np
import zmq

import flowmap

ROWS, HIDDEN, PER_STEP, STEPS = 128, 256, 2, 3
FRAME_BYTES = ROWS * HIDDEN * 4  # float32 hidden states, forwarded unchanged
EXPECT = {"kind": "pass_through", "seam": "engine -> bridge",
          "bytes_per_step": PER_STEP * FRAME_BYTES}
TRANSFORM = False  # the control normalises what it got and sends that (relay_frames_fixed.py)


def _header(**fields: Any) -> bytes:
    return json.dumps({"shape": [ROWS, HIDDEN], "dtype": "float32", **fields}).encode()


def engine(port: int) -> None:
    flowmap.set_owner("engine")
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            hidden = rng.standard_normal((ROWS, HIDDEN), dtype=np.float32)
            push.send_multipart([_header(i=i), hidden.tobytes()])
    push.close(linger=-1)
    ctx.term()


def trainer(port: int) -> None:
    flowmap.set_owner("trainer")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            header, data = pull.recv_multipart()
            shape = json.loads(header)["shape"]
            assert np.frombuffer(data, dtype=np.float32).reshape(shape).shape == (ROWS, HIDDEN)
    pull.close()
    ctx.term()


def main(transform: bool = TRANSFORM) -> None:
    flowmap.set_owner("bridge")
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    port_in = pull.bind_to_random_port("tcp://127.0.0.1")
    port_out = push.bind_to_random_port("tcp://127.0.0.1")
    spawn = mp.get_context("spawn")
    procs = [spawn.Process(target=engine, args=(port_in,)),
             spawn.Process(target=trainer, args=(port_out,))]
    for p in procs:
        p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            frames = pull.recv_multipart()
            if transform:
                a = np.frombuffer(frames[1], dtype=np.float32).reshape(ROWS, HIDDEN)
                normed = (a - a.mean(1, keepdims=True)) / (a.std(1, keepdims=True) + 1e-6)
                frames = [_header(normed=True), normed.astype(np.float32).tobytes()]
            push.send_multipart(frames)
    for p in procs:
        p.join()
    pull.close()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
