"""An agent loop that sends the engine each conversation's whole chat transcript every turn.

The shape of an OpenAI-compatible chat loop (a `messages` list rendered to one string, or
an HTTP body): two agent workers, two conversations each, send the transcript so far over
ZMQ DEALER/ROUTER; the engine answers 600 characters, a tool adds 200, and the next turn
sends it all again. A string's length is metadata: it grows as token ids would. The fix
(`prefix_transcript_fixed.py`): send each turn's new text, and keep the conversation at
the engine (a session id).

    flowmap trace examples/field/prefix_transcript.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import pickle

import zmq

import flowmap

WORKERS, CONVERSATIONS, TURNS, STEPS = 2, 2, 4, 3
PROMPT, ANSWER, TOOL = 2000, 600, 200
# resent per step: turns 2..4 send the 2,000, 2,800 and 3,600 characters already sent
EXPECT = {"kind": "prefix_resend", "seam": "agent -> engine",
          "bytes_per_step": WORKERS * CONVERSATIONS
          * sum(PROMPT + k * (ANSWER + TOOL) for k in range(TURNS - 1))}


def engine(port: int) -> None:
    flowmap.set_owner("engine")
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(f"tcp://127.0.0.1:{port}")
    for _ in range(STEPS * WORKERS * CONVERSATIONS * TURNS):
        ident, raw = router.recv_multipart()
        request = pickle.loads(raw)
        flowmap.step(request["step"])
        router.send_multipart([ident, pickle.dumps({"id": request["id"], "content": "a" * ANSWER})])
    router.close()
    ctx.term()


def agent(w: int, port: int, deltas: bool) -> None:
    flowmap.set_owner(f"agent/{w}")
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        chats = {c: f"{w}-{c}-{step} " + "p" * PROMPT for c in range(CONVERSATIONS)}
        new = dict(chats)
        for _ in range(TURNS):
            for c in range(CONVERSATIONS):  # the conversations take turns
                body = new[c] if deltas else chats[c]
                dealer.send_pyobj({"id": c, "step": step, "messages": body})
                answer = dealer.recv_pyobj()["content"]
                new[c] = answer + "t" * TOOL
                chats[c] += new[c]
    dealer.close()
    ctx.term()


def main(deltas: bool = False) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    procs = [mp.Process(target=engine, args=(port,))]
    procs += [mp.Process(target=agent, args=(w, port, deltas)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
