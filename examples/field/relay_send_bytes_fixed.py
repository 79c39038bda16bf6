"""Control for `relay_send_bytes.py`: the batcher normalises the observations and sends
what it computed, as raw bytes it pickled itself. It is no relay: no finding may name it.

    flowmap trace examples/field/relay_send_bytes_fixed.py && flowmap report
"""

from __future__ import annotations

from relay_send_bytes import main

EXPECT = None

if __name__ == "__main__":
    main(transform=True)
