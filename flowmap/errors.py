"""flowmap's errors: each carries the exit code the CLI turns it into.

Library code raises these with one sentence that says what is wrong and, where
it helps, what to do next; `flowmap.cli` prints that sentence and exits — a
user's mistake never ends in a traceback.
"""

from __future__ import annotations


class FlowmapError(Exception):
    """Base of flowmap's own errors."""

    exit_code = 1


class UsageError(FlowmapError):
    """A bad argument, option value or configuration file."""

    exit_code = 2


class NotATrace(UsageError):
    """The path given is missing, unreadable, or not a flowmap run or shard."""


class NoRunFound(UsageError):
    """No RUN was given and none was found in the working directory."""
