"""Control: a buffer that sends a batch of its own, of the same shapes, is no relay.

`relay_zmq_deepcopy.py` with one change: the buffer computes every array of what it
sends from the copy (tokens shifted, log-probs scaled, values squashed). Each message
has the size, the keys and the shapes of the one it got, but none of its content, so no
copy of it is claimed and no finding is given.

    flowmap trace examples/field/relay_zmq_deepcopy_fixed.py && flowmap report
"""

from __future__ import annotations

from relay_zmq_deepcopy import main

EXPECT = None

if __name__ == "__main__":
    main(compute=True)
