"""A function imported into other modules before it was patched loses no call.

GIVEN `lib.kl`, already imported into `user` (`from lib import kl`) when the seam map is applied,
WHEN the map names `lib:kl`,
THEN calls through `user`'s name are recorded too: the patcher rebinds every module's copy.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import flowmap
from flowmap.seams import Patcher, parse_seam_map


def test_copies_in_modules_imported_before_the_patch_are_rebound(tmp_path, monkeypatch):
    (tmp_path / "copies_lib.py").write_text("def kl(a, b):\n    return a - b\n")
    (tmp_path / "copies_user.py").write_text(textwrap.dedent('''
        from copies_lib import kl as divergence

        def use(a, b):
            return divergence(a, b)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    lib = importlib.import_module("copies_lib")
    user = importlib.import_module("copies_user")
    try:
        seam_map = parse_seam_map('seams:\n  - target: "copies_lib:kl"\n    owner: kl\n')
        with flowmap.tracing(str(tmp_path / "run")):
            Patcher(seam_map).install()
            assert user.divergence is lib.kl  # the copy is the wrapper now
            user.use(3, 1)
            lib.kl(2, 1)
        run = flowmap.load(str(tmp_path / "run"))
        assert [h.dst for h in run.hops if h.src == "main"] == ["kl", "kl"]
    finally:
        for m in ("copies_lib", "copies_user"):
            sys.modules.pop(m, None)
