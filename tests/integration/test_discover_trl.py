"""`flowmap discover` on a real TRL GRPOTrainer run on CPU, against the TRL preset.

The run is the one `test_trl_preset.py` traces (a tiny random Qwen2, a
tokenizer trained on the spot, nothing downloaded). Discovery must find the
preset's targets that move tensors, and the map it writes must record, when
traced, what discovery saw.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest
from discover_records import assert_round_trip

from flowmap.seams import load_seam_map, preset_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("trl", "transformers", "datasets")),
        reason="needs trl, transformers and datasets: pip install -e '.[integrations]'",
    ),
]

HERE = Path(__file__).resolve().parent
# TRL 1.16 with transformers' generate hands token ids to and from
# `_generate_single_turn` as Python lists: no tensor crosses it, so discovery
# (which looks for tensors and arrays) does not list it.
LISTS_ONLY = {"trl.trainer.grpo_trainer:GRPOTrainer._generate_single_turn"}


def _tiny_grpo() -> str:
    """The TRL script of test_trl_preset.py (one script, one place)."""
    spec = importlib.util.spec_from_file_location("_trl_preset_test", HERE / "test_trl_preset.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return textwrap.dedent(mod.TINY_GRPO)


def _defined_at(target: str) -> str:
    """`module:qualname` of the function a target names, where it is defined."""
    import importlib

    module, qualname = target.split(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    obj = getattr(obj, "__wrapped__", obj)
    return f"{obj.__module__}:{obj.__qualname__}"


@pytest.fixture(scope="module")
def trl_discovery(tmp_path_factory):
    from flowmap_cli import run_cli

    tmp = tmp_path_factory.mktemp("trl_discover")
    (tmp / "tiny_grpo.py").write_text(_tiny_grpo())
    r = run_cli(["discover", "-o", str(tmp / "seams.yaml"), "tiny_grpo.py", str(tmp / "out")],
                cwd=tmp, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp, r


def test_discovery_finds_the_presets_tensor_seams(trl_discovery):
    tmp, r = trl_discovery
    found = {s.target for s in load_seam_map(str(tmp / "seams.yaml")).seams}
    preset = {s.target for s in load_seam_map(preset_path("trl")).seams if not s.optional}
    # a function imported into grpo_trainer (split_tensor_dict, from trl.trainer.utils) is
    # discovered where it is defined, which covers every module's calls: the same function
    assert {_defined_at(t) for t in preset} - {_defined_at(t) for t in found} == \
        {_defined_at(t) for t in LISTS_ONLY}, preset - found
    # the preset's step path counted TRL's two optimizer steps
    assert "2 steps" in r.stderr
    # the payload was followed between GRPOTrainer's own methods, and the model's
    # forward (transformers) never became a seam
    assert not any(t.startswith("transformers") for t in found)
    assert "GRPOTrainer.compute_loss folds in:" in r.stderr


def test_the_discovered_map_records_what_discovery_saw(trl_discovery, run_cli):
    tmp, _ = trl_discovery
    t = run_cli(["trace", "-o", str(tmp / "run"), "--seams", str(tmp / "seams.yaml"),
                 "tiny_grpo.py", str(tmp / "out2")], cwd=tmp, timeout=600)
    assert t.returncode == 0, t.stderr[-3000:]
    assert "never appeared" not in t.stderr
    assert_round_trip(tmp / "seams.yaml", tmp / "run")
