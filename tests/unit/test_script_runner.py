"""The script runner: a script run as `__main__` with its top-level names watched runs as Python
runs it, and the watcher hears each name as it is bound.

GIVEN a script that uses what top-level code uses (functions reading globals, `global`, classes,
a dataclass, `del`, `__name__`),
WHEN flowmap runs it with and without a watcher,
THEN it prints the same, and the watcher heard every top-level name in order.
"""

from __future__ import annotations

import contextlib
import io
import sys
import textwrap

from flowmap.capture.script import main_module, run_script

SCRIPT = '''
from dataclasses import dataclass

COUNT = 1


def bump():
    global COUNT
    COUNT += 1
    return COUNT


@dataclass
class Box:
    value: int


temp = 5
del temp
for i in range(3):
    bump()
if __name__ == "__main__":
    print(COUNT, Box(2).value, "temp" in globals(), sorted(k for k in locals() if k == "Box"))
'''


def _run(path: str, on_bind=None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run_script(path, on_bind)
    return out.getvalue()


def test_a_watched_script_runs_as_python_runs_it(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SCRIPT))
    heard: list[str] = []

    def on_bind(module, name):
        heard.append(name)
        assert module.__dict__[name] is not None or name == "temp"
        return False

    main = sys.modules["__main__"]
    plain, watched = _run(str(path)), _run(str(path), on_bind)
    assert plain == watched == "4 2 False ['Box']\n"
    # COUNT, which bump() declares global, is stored by STORE_GLOBAL, past any locals mapping
    assert heard[:4] == ["dataclass", "bump", "Box", "temp"] and "i" in heard
    assert sys.modules["__main__"] is main  # the caller's __main__ is back
    assert main_module() is not None and main_module().COUNT == 4


def test_once_the_watcher_has_heard_enough_stores_go_straight_to_the_dict(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SCRIPT))
    heard: list[str] = []

    def on_bind(module, name):
        heard.append(name)
        return name == "bump"

    assert _run(str(path), on_bind) == "4 2 False ['Box']\n"
    assert heard == ["dataclass", "bump"]
