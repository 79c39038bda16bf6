"""Type-specific payload describers, dispatched by type (see `walk.py`).

Importing this package registers them all. Library describers (torch, numpy,
tabular, tensordict) claim their types by MRO before Python's own types are
tried (`containers`); a library is never imported here: a describer looks its
types up in `sys.modules`, which holds them whenever a payload of that type exists.
"""

from flowmap.capture.describers import (  # noqa: F401  (imported to register)
    containers,
    numpy_,
    tabular,
    tensordict_,
    torch_,
)
