"""Control for `relay_zmq_raw.py`: the bridge sends logits it computed (shifted by each
row's maximum), as raw bytes it pickled itself. It is no relay: no finding may name it.

    flowmap trace examples/field/relay_zmq_raw_fixed.py && flowmap report
"""

from __future__ import annotations

from relay_zmq_raw import main

EXPECT = None

if __name__ == "__main__":
    main(transform=True)
