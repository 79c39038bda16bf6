"""`flowmap discover`: find the seams of code nobody instrumented, and write the seam map.

The program runs unmodified while a profile hook (`sys.monitoring` on 3.12+)
watches its Python calls (`watch`); calls whose arguments or result carry a
tensor or an array are described, metadata only (`record`). Every process
writes what it saw to a discovery dir (`process`); the parent merges them,
folds helpers into the hand-overs around them and ranks what is left
(`candidates`), prints the table (`table`) and writes a seam map
(`seammap`) ready for `flowmap trace --seams`.
"""

from __future__ import annotations

from flowmap.discover.candidates import Candidate, Discovery, analyse
from flowmap.discover.filters import Filters
from flowmap.discover.watch import Budget, Watcher

__all__ = ["Budget", "Candidate", "Discovery", "Filters", "Watcher", "analyse"]
