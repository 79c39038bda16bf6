"""Configuration: defaults < YAML file < flags, and one clear sentence for a bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowmap.trainer.config import Config, ConfigError, build, parse_args


def test_defaults_are_the_demo() -> None:
    cfg = parse_args([])
    assert isinstance(cfg, Config)
    assert (cfg.train.dp, cfg.rollout.engines, cfg.train.max_staleness) == (2, 2, 1)


def test_yaml_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  steps: 7\n  lr: 1e-3\n  dp: 1\nrollout:\n  n: 4\n")
    cfg = parse_args(["--config", str(path), "--dp", "2", "--set", "train.clip_eps=0.1",
                      "--max-staleness", "3", "--engines", "1"])
    assert cfg.train.steps == 7 and cfg.train.lr == 1e-3  # YAML's "1e-3" string coerced
    assert cfg.train.dp == 2 and cfg.train.max_staleness == 3 and cfg.rollout.engines == 1
    assert cfg.train.clip_eps == 0.1 and cfg.rollout.n == 4


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"train.steps": 0}, "steps must be a positive int"),
        ({"train.lr": "fast"}, "train.lr must be a float"),
        ({"train.nope": 1}, "unknown setting 'train.nope'"),
        ({"nope.x": 1}, "unknown section 'nope'"),
        ({"train.queue_depth": 3}, "queue_depth must be 1 or 2"),
    ],
)
def test_bad_values_fail_with_one_sentence(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(values)


def test_bad_yaml_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        parse_args(["--config", str(path)])
