"""Every verb's first step: a RUN argument in, the run's `RunView` out.

`report`, `render`, `export`, `baseline`, `check` and `diff` all take a RUN
(default: the newest run in the working directory) and some take
`--project PRESET[@CONTEXT]`; they open it here, the same way, so a missing
run, an unreadable shard or an unknown preset reads the same sentence from
every verb.
"""

from __future__ import annotations

from flowmap.model.run import load, resolve
from flowmap.model.view import RunView


def open_view(run: str | None, project: str | None = None) -> RunView:
    """The view of `run` (None: the newest run here), its leaves scaled to `project` if given.

    The view's `path` is the run's path as resolved.
    """
    loaded = load(resolve(run))
    if project:
        from flowmap.model.projection import project as project_run

        loaded = project_run(loaded, project)
    return loaded.view
