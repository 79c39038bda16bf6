"""Who is told when the process's step changes, beside the tracer.

Called with the new step by `Tracer.set_step`, outside the tracer's lock. The
Flight Recorder's reader (flowmap/integrations/transports/flight.py) notes the
time of each change, to place the collectives it reads later on the step they
were issued in. A module of its own, importing nothing, so the tracer can call it
without importing the capture state that refers back to the tracer.
"""

from __future__ import annotations

from collections.abc import Callable

hooks: list[Callable[[int], None]] = []
