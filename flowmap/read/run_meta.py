"""Read `run.json`, the run's small description, without trusting it.

The file is informational (command, times, exit code): a missing one is an
empty description, and a corrupt, binary, deeply nested or non-object one is
one problem sentence in the run's health, never a reason to refuse the run.
"""

from __future__ import annotations

from typing import Any

from flowmap.errors import UsageError
from flowmap.safe_read import load_json, read_text


def read_run_meta(path: str, problems: list[str] | None = None) -> dict[str, Any]:
    """The object in `path`, or {} (with a sentence added to `problems`) if unreadable."""
    try:
        doc = load_json(read_text(path, "run description"), path, "run description")
    except FileNotFoundError:
        return {}
    except UsageError as exc:
        why = str(exc)
    except (OSError, ValueError):
        why = f"the run description {path} is not valid JSON"
    else:
        if isinstance(doc, dict):
            return doc
        why = f"the run description {path} is not a JSON object"
    if problems is not None:
        problems.append(why + "; ignored")
    return {}
