"""The live side's parts on hand-built runs: status, rates, /metrics, the top screen."""

from __future__ import annotations

import io
import json
import os
import socket

import runs
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

import flowmap
from flowmap.live.metrics import registry
from flowmap.live.rates import Rates
from flowmap.live.screen import ranked, screen
from flowmap.live.status import CUT_SHORT, EXITED, RUNNING, status
from flowmap.live.watch import Watch


def _run_with_meta(tmp_path, **meta):
    path = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2))
    with open(os.path.join(path, "run.json"), "w") as f:
        json.dump({"flowmap": "run", "schema": 1, **meta}, f)
    return flowmap.load(path)


def test_status_reads_exit_codes_and_open_shards(tmp_path):
    exited = status(_run_with_meta(tmp_path, exit_code=0))
    assert exited.state == EXITED and exited.sentence == "the program exited with code 0"
    killed = status(_run_with_meta(tmp_path, exit_code=-9))
    assert killed.state == CUT_SHORT and "(killed by signal 9)" in killed.sentence


def test_an_open_shard_of_a_dead_process_here_is_cut_short(tmp_path):
    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "a", "b", "x", [runs.tensor("t", (4,))])
    w.close(20, clean=False)
    # the header names this host and a pid that is not running
    path = tmp_path / "run" / "h-1-1.flowmap.jsonl"
    dead = 2 ** 22 + 12345
    path.write_text(path.read_text().replace('"host":"testhost"', f'"host":"{socket.gethostname()}"')
                    .replace('"pid":1,', f'"pid":{dead},'))
    s = status(flowmap.load(str(tmp_path / "run")))
    assert s.state == CUT_SHORT
    assert s.sentence == "the run was cut short: 1 of 1 processes never closed their shard"
    # the same shard of a process on another host: it may still be running there
    path.write_text(path.read_text().replace(f'"host":"{socket.gethostname()}"', '"host":"elsewhere"'))
    assert status(flowmap.load(str(tmp_path / "run"))).state == RUNNING


def test_rates_are_differences_of_totals_over_the_window(tmp_path):
    run = flowmap.load(runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2)))
    key, seam = next(iter(run.seams.items()))
    rates = Rates(window_s=10.0)
    rates.add(100.0, {})
    assert rates.per_second() == {}  # one point: no window yet
    rates.add(104.0, run.seams)
    assert rates.per_second()[key] == (seam.total_bytes / 4.0, seam.hops / 4.0)
    rates.add(120.0, run.seams)  # the first point has left the window
    assert rates.per_second()[key] == (0.0, 0.0)


def test_metrics_equal_the_runs_seam_and_owner_figures(tmp_path):
    path = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=3))
    frame = Watch(path).update()
    text = generate_latest(registry(lambda: frame)).decode()
    got: dict[str, dict] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            got.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    run = flowmap.load(path)
    seams = {(dict(k)["src"], dict(k)["dst"], dict(k)["name"]): v
             for k, v in got["flowmap_seam_bytes_total"].items()}
    assert seams == {s.key: s.total_bytes for s in run.seams.values()}
    transports = {(dict(k)["src"], dict(k)["dst"], dict(k)["name"], dict(k)["transport"])
                  for k in got["flowmap_seam_transport_info"]}
    assert transports == {(*s.key, t) for s in run.seams.values() for t in s.transports}
    hops = {(dict(k)["src"], dict(k)["dst"], dict(k)["name"]): v
            for k, v in got["flowmap_seam_hops_total"].items()}
    assert hops == {s.key: s.hops for s in run.seams.values()}
    assert {dict(k)["owner"]: v for k, v in got["flowmap_owner_out_bytes_total"].items()} == {
        o.name: o.bytes_out for o in run.owners.values()}
    assert {dict(k)["counter"]: v for k, v in got["flowmap_recorded_value"].items()} == {
        c.name: c.last for c in run.counters.values()}
    assert got["flowmap_hops_total"][()] == run.num_hops
    assert got["flowmap_items_dropped_total"] == {(("reason", "stale"),): 2.0}


def test_metrics_before_the_first_read_are_empty():
    assert generate_latest(registry(lambda: None)) == b""


def test_screen_ranks_seams_as_asked_and_shows_health(tmp_path):
    path = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2))
    frame = Watch(path).update()
    heaviest = next(iter(frame.run.seams))
    frame.rates = {k: (0.0, 0.0) for k in frame.run.seams}
    light = list(frame.run.seams)[-1]
    frame.rates[light] = (1e9, 5.0)
    assert ranked(frame, "total")[0].key == heaviest
    assert ranked(frame, "rate")[0].key == light
    assert ranked(frame, "hops")[0].key == light
    out = io.StringIO()
    Console(file=out, width=160).print(screen(frame, sort="rate", width=160))
    text = out.getvalue()
    assert "5 processes traced · 2 steps" in text and "in flight 8" in text
    assert "sorted by rate" in text and "findings so far:" in text
    assert text.index(f"{light[0]} -> {light[1]} : {light[2]}") < text.index(
        f"{heaviest[0]} -> {heaviest[1]} : {heaviest[2]}")


def test_page_data_after_a_version_answers_once_the_run_grew(tmp_path):
    # GIVEN `serve` over a run still being written (its shard not closed)
    import threading
    import time
    import urllib.request

    from flowmap.live.serve import LiveServer
    from flowmap.live.watch import UPDATE_S

    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "rollout", "buffer", "traj", [runs.tensor("t", (4,))])
    w.close(20, clean=False)
    server = LiveServer(str(tmp_path / "run"), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        def get(query: str) -> dict:
            with urllib.request.urlopen(f"{server.url}data.json{query}", timeout=30) as r:
                return json.loads(r.read())

        time.sleep(2.5 * UPDATE_S)  # the second update adds the findings: newer data too
        first = get("")["live"]["version"]
        assert get("?after=x")["live"]["version"] == first  # not a version: answered at once
        got: list[tuple[float, dict]] = []
        asked = time.monotonic()

        def ask() -> None:
            doc = get(f"?after={first}")
            got.append((time.monotonic(), doc))

        asking = threading.Thread(target=ask)
        asking.start()
        # WHEN nothing new is written, THEN the request waits
        asking.join(2 * UPDATE_S)
        assert asking.is_alive() and not got
        # WHEN a hop on a new seam is written, THEN the answer is the newer data, within an update
        w.hop(30, "rollout", "probe", "late", [runs.tensor("t", (4,))])
        w.close(40, clean=False)
        written = time.monotonic()
        asking.join(10)
        assert got, "no answer"
        at, doc = got[0]
        assert doc["live"]["version"] > first and '"probe"' in json.dumps(doc)
        assert at - written <= UPDATE_S + 1.0 and at - asked >= 2 * UPDATE_S
    finally:
        server.shutdown()


def test_screen_columns_line_up_and_a_narrow_terminal_shortens_the_seam_names(tmp_path):
    path = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2))
    frame = Watch(path).update()
    frame.rates = {}
    n = len(frame.run.seams)

    def table(width: int) -> tuple[list[str], str]:
        out = io.StringIO()
        Console(file=out, width=width).print(screen(frame, rows=n - 1, width=width))
        lines = out.getvalue().splitlines()
        head = next(i for i, x in enumerate(lines) if x.startswith("SEAM"))
        return lines[head:head + n], lines[head + n]  # header and n - 1 seams; the caption

    wide, caption = table(200)
    assert caption == "1 more seams"
    names = [row.split("  ")[0] for row in wide[1:]]
    assert names == [f"{a} -> {b} : {c}" for a, b, c in (s.key for s in ranked(frame, "rate"))][
        :n - 1]
    narrow_width = len(wide[0].rstrip()) - 8  # eight columns too few for the longest name
    for rows in (wide, table(narrow_width)[0]):
        # every figure ends in its column, right-aligned under its header; every column shows
        assert rows[0].rstrip().endswith("TRANSPORT"), rows[0]
        for col in ("TOTAL", "HOPS", "MAX"):
            end = rows[0].index(f" {col} ") + len(col) + 1
            assert all(r[end - 1] != " " and r[end] == " " for r in rows[1:]), (col, rows)
    narrow = table(narrow_width)[0]
    cut = [row.split("  ")[0] for row in narrow[1:]]
    assert any("…" in name for name in cut)  # names gave way, each part cut in its middle
    assert len(set(cut)) == len(cut)  # and still tell the seams apart
    assert all(len(x.rstrip()) <= narrow_width for x in narrow)
