"""The docs say what ships: install lines, the README's config file, the JSON document's keys,
and scripts that leave tracked files alone unless asked."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import subprocess

import pytest
import yaml
from runs import write_rl_run
from typer.testing import CliRunner

from flowmap.cli.main import app

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = [os.path.join(REPO, "README.md"), *sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))]


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_no_install_line_installs_the_unrelated_flowmap_package():
    # `flowmap` on PyPI is a 2018 package; ours is the distribution `flowmap-rl`
    bare = re.compile(r"pip install\b[^\n`]*?(?<![\w./-])['\"]?flowmap(?![\w-])")
    wrong = [(os.path.relpath(p, REPO), ln.strip()) for p in DOCS for ln in _text(p).splitlines()
             if bare.search(ln.split(" #")[0])]  # the command, not its comment
    assert wrong == []
    assert any("pip install flowmap-rl" in _text(p) for p in DOCS)


def test_the_readme_shows_the_config_file_its_command_reads():
    from trainer.config import build

    readme = _text(os.path.join(REPO, "README.md"))
    assert "--config my.yaml" in readme
    block = re.search(r"```yaml\n# my\.yaml\n(.*?)```", readme, re.S)
    assert block, "the README names --config my.yaml but never shows my.yaml"
    config = build(yaml.safe_load(block.group(1)))  # the trainer accepts it as written
    assert config.train.steps == 20


def test_every_key_of_report_json_is_documented(tmp_path):
    run = write_rl_run(str(tmp_path / "run"))
    r = CliRunner().invoke(app, ["report", "--json", run])
    assert r.exit_code == 0, r.output
    documented = _text(os.path.join(REPO, "docs", "report-json.md"))
    missing = [k for k in json.loads(r.output) if f'"{k}":' not in documented]
    assert missing == []


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"script_{name}", os.path.join(REPO, "scripts", f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script, default", [("screenshot", "DEFAULT_OUT"), ("case_study", "OUT"),
                                             ("live_screenshot", "DEFAULT_OUT")])
def test_scripts_write_untracked_files_unless_told_docs(script, default, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    out = getattr(_load_script(script), default)
    rel = os.path.relpath(out, REPO)
    assert not rel.startswith(os.path.join("docs", ""))
    if os.path.isdir(os.path.join(REPO, ".git")) or os.path.isfile(os.path.join(REPO, ".git")):
        ignored = subprocess.run(["git", "check-ignore", "-q", rel], cwd=REPO)
        assert ignored.returncode == 0, f"{rel} is not git-ignored"
