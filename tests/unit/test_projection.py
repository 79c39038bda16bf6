"""Projection to production scale: arithmetic, presets, labelling."""

from __future__ import annotations

import pytest
import torch

import flowmap
from flowmap.errors import UsageError
from flowmap.model.projection import builtin_presets, load_preset, parse_spec, project
from flowmap.reporters.json_document import report_document


def replay_run(tmp_path):
    with flowmap.tracing(tmp_path / "run"):
        for i in range(4):
            flowmap.step(i)
            flowmap.hop(
                "rollout/0", "ready_buffer",
                {"indexer_topk": torch.zeros(40, 2, 4, dtype=torch.int32),
                 "routed_experts": torch.zeros(40, 2, 2, dtype=torch.int32),
                 "tokens": torch.zeros(40, dtype=torch.int64)},
                name="trajectory",
                dims={"indexer_topk": ("tokens", "layers", "index_topk"),
                      "routed_experts": ("tokens", "layers", "topk"),
                      "tokens": ("tokens",)},
            )
    return flowmap.load(tmp_path / "run")


def test_shipped_presets():
    assert {"deepseek-v3.2", "deepseek-v3", "qwen3-30b-a3b"} <= set(builtin_presets())
    p = load_preset("deepseek-v3.2")
    assert p.dims["index_topk"] == 2048 and p.dims["layers"] == 61


def test_indexer_topk_of_deepseek_v32_at_32k_is_16_gb(tmp_path):
    run = project(replay_run(tmp_path), "deepseek-v3.2@32k")
    (seam,) = run.seams.values()
    leaves = {leaf.path: leaf for leaf in seam.leaves}
    # 32768 tokens x 61 layers x 2048 x 4 B = 16.4 GB per sample, as the field reports
    assert leaves["indexer_topk"].max_bytes == 32768 * 61 * 2048 * 4
    assert leaves["indexer_topk"].shape == (32768, 61, 2048)
    assert leaves["routed_experts"].max_bytes == 32768 * 61 * 8 * 4  # 64 MB
    assert leaves["tokens"].max_bytes == 32768 * 8
    assert seam.max_bytes == sum(v.max_bytes for v in leaves.values())


def test_a_preset_without_a_dim_keeps_the_traced_size(tmp_path):
    run = project(replay_run(tmp_path), "qwen3-30b-a3b@8k")
    leaves = {leaf.path: leaf for leaf in next(iter(run.seams.values())).leaves}
    assert leaves["indexer_topk"].shape == (8192, 48, 4)
    assert leaves["routed_experts"].max_bytes == 8192 * 48 * 8 * 4


def test_projections_are_labelled(tmp_path):
    run = project(replay_run(tmp_path), "deepseek-v3@128k")
    doc = report_document(run.view)
    assert doc["projection"]["preset"] == "deepseek-v3"
    assert doc["projection"]["context"] == 131072
    assert "projected" in doc["projection"]["note"]
    assert report_document(replay_run(tmp_path / "again").view)["projection"] is None


def test_user_presets_and_bad_specs(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("name: mine\ndims: {layers: 10}\ncontexts: {4k: 4096}\n")
    preset, ctx, label = parse_spec(f"{f}@4k")
    assert preset.name == "mine" and ctx == 4096 and label == "4k"
    assert parse_spec(f"{f}@1000")[1] == 1000
    bad = tmp_path / "bad.yaml"
    bad.write_text("dims: {layers: 10}\nwhatever: 1\n")
    with pytest.raises(UsageError, match="unknown key 'whatever'"):
        load_preset(str(bad))
    with pytest.raises(UsageError, match="no preset"):
        load_preset("gpt-17")
    with pytest.raises(UsageError, match="cannot read context"):
        parse_spec("deepseek-v3@lots")


def test_report_cli_projects(tmp_path, run_cli):
    replay_run(tmp_path)
    r = run_cli(["report", str(tmp_path / "run"), "--project", "deepseek-v3.2@32k"],
                env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "PROJECTION" in r.stdout and "GiB" in r.stdout
    r = run_cli(["report", str(tmp_path / "run"), "--project", "nope"])
    assert r.returncode == 2 and "no preset" in r.stderr


def test_render_and_diff_label_projections(tmp_path, run_cli):
    replay_run(tmp_path)
    run = str(tmp_path / "run")
    r = run_cli(["render", run, "--dot", str(tmp_path / "g.dot"), "--project", "deepseek-v3.2@32k"])
    assert r.returncode == 0, r.stderr
    assert "PROJECTION" in (tmp_path / "g.dot").read_text()
    r = run_cli(["render", run, "--html", str(tmp_path / "p.html"), "--project", "deepseek-v3.2"])
    assert r.returncode == 0, r.stderr
    assert "projected to deepseek-v3.2 at 32k tokens" in (tmp_path / "p.html").read_text()
    r = run_cli(["diff", run, run, "--project", "deepseek-v3.2@32k"], env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "PROJECTION to deepseek-v3.2@32k" in r.stdout
