"""Type-specific payload describers, dispatched by type (see `walk.py`).

Library describers register first and claim their types by MRO; a library
is never imported here: a describer looks its types up in `sys.modules`, which
holds them whenever a payload of that type exists.
"""

from flowmap.capture.describers import (  # noqa: F401  (register resolvers)
    containers,  # noqa: F401, I001  (Python's types, tried last)
    numpy_,
    tabular,
    tensordict_,
    torch_,
)
