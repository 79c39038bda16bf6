"""A generation server answers each request with JSON of its tensors (REQ -> REP, send_json).

The client asks for a completion; the server replies
`{"token_ids": ids.tolist(), "logprobs": lp.tolist()}` for 384 tokens (int32 ids, float32
logprobs: 8 B a token as tensors), JSON text: a float's repr is ~20 characters, an id 4..5.
By hand (len of json.dumps of each reply, less 384 x 8 B): 46,136 B a step.
"""
import multiprocessing as mp
import tempfile

import torch
import zmq

import flowmap

STEPS = 4
PER_STEP = 6
N = 384
EXPECT = {"kind": "serialisation", "seam": "server -> client", "bytes_per_step": 46136}


def reply(i: int) -> dict:
    g = torch.Generator().manual_seed(i)
    return {"token_ids": torch.randint(0, 32000, (N,), generator=g, dtype=torch.int32).tolist(),
            "logprobs": (-torch.rand(N, generator=g)).tolist()}


def server(addr: str) -> None:
    flowmap.set_owner("server")
    s = zmq.Context().socket(zmq.REP)
    s.bind(addr)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            req = s.recv_json()
            s.send_json(reply(req["i"]))
    s.close()


def main() -> None:
    flowmap.set_owner("client")
    addr = f"ipc://{tempfile.mkdtemp()}/gen"
    p = mp.get_context("fork").Process(target=server, args=(addr,))
    p.start()
    s = zmq.Context().socket(zmq.REQ)
    s.connect(addr)
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            s.send_json({"i": i, "prompt": "hello"})
            s.recv_json()
    p.join()


if __name__ == "__main__":
    main()
