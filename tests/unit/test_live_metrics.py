"""`/metrics` by Prometheus's conventions: counters never go down, label sets stay stable,
series are capped with an `other` bucket, the run's state and freshness are gauges, and
the names pass promtool's lint rules. Read with `prometheus_client`'s own parser."""

from __future__ import annotations

import dataclasses
import re

import runs
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from flowmap.live.metrics import MAX_SERIES, OTHER, registry
from flowmap.live.status import EXITED, RUNNING, Status
from flowmap.live.watch import Frame, Watch

TYPES = ("counter", "gauge", "histogram", "gauge_histogram", "summary", "untyped")
NON_BASE = ("milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "days",
            "kilobytes", "megabytes", "gigabytes", "bits", "percent", "celsius")


def _frame(tmp_path, name: str, seams: dict[tuple[str, str, str], list[tuple[int, str]]],
           state: str = RUNNING) -> Frame:
    """A watch's frame of a run whose seams carry hops of (bytes, transport)."""
    w = runs.ShardWriter(str(tmp_path / name / "h-1-1.flowmap.jsonl"), 1)
    t = 10
    for (src, dst, seam), hops in seams.items():
        for nbytes, transport in hops:
            w.hop(t, src, dst, seam, [runs.tensor("t", (nbytes // 4,))], transport=transport)
            t += 10
    w.close(t, clean=state != RUNNING)
    frame = Watch(str(tmp_path / name)).update()
    return dataclasses.replace(frame, status=Status(state, state))


def _scrape(reg) -> tuple[str, dict[str, dict[tuple, float]]]:
    text = generate_latest(reg).decode()
    got: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            got.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return text, got


def _lint(text: str) -> list[str]:
    """promtool check metrics' rules (client_golang's promlint) that names can break."""
    problems = []
    for fam in text_string_to_metric_families(text):
        declared = re.search(rf"^# TYPE ({fam.name}(?:_total)?) ", text, re.M)
        name = declared.group(1) if declared else fam.name
        if not fam.documentation:
            problems.append(f"{name}: no help text")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            problems.append(f"{name}: not snake_case")
        if fam.type == "counter" and not name.endswith("_total"):
            problems.append(f"{name}: a counter's name should end in _total")
        if fam.type != "counter" and name.endswith(("_total", "_count", "_sum", "_bucket")):
            problems.append(f"{name}: a reserved suffix on a {fam.type}")
        for t in TYPES:
            if f"_{t}_" in name or name.endswith(f"_{t}"):
                problems.append(f"{name}: the name includes the type {t!r}")
        problems += [f"{name}: unit {u} is not a base unit" for u in NON_BASE if u in name]
        for s in fam.samples:
            problems += [f"{name}: label {k} not snake_case" for k in s.labels
                         if not re.fullmatch(r"[a-z_][a-z0-9_]*", k)]
    return problems


def test_the_metrics_pass_promtools_lint_rules(tmp_path):
    frame = _frame(tmp_path, "run", {("a", "b", "x"): [(40, "ref")]})
    text, got = _scrape(registry(lambda: frame))
    assert _lint(text) == []
    # AND the run's state and freshness are there: one state at 1, an age in seconds
    assert got["flowmap_run_state"] == {
        (("state", s),): float(s == "running") for s in ("running", "exited", "cut_short", "removed")}
    assert 0 <= got["flowmap_last_event_age_seconds"][()] < 60


def test_counters_never_go_down_and_a_seams_labels_stay_stable(tmp_path):
    # GIVEN a running run whose first read shows `(untraced) -> b : x` with 5 hops (a
    # queue's receives whose sends were not read yet) and `a -> b : x` by one transport
    first = _frame(tmp_path, "one", {("(untraced)", "b", "x"): [(40, "queue")] * 5,
                                     ("a", "b", "x"): [(40, "pickle")] * 2})
    # WHEN the next read joins 3 of them to their sends, by a second transport
    second = _frame(tmp_path, "two", {("(untraced)", "b", "x"): [(40, "queue")] * 2,
                                      ("a", "b", "x"): [(40, "pickle")] * 2 + [(40, "shm")] * 3})
    frames = [first]
    reg = registry(lambda: frames[-1])
    _, before = _scrape(reg)
    frames.append(second)
    _, after = _scrape(reg)
    # THEN no counter went down
    for name, series in before.items():
        if name.endswith("_total"):
            for labels, value in series.items():
                assert after[name][labels] >= value, (name, labels)
    # AND the seam kept its one series, its transports are info series of their own
    key = (("dst", "b"), ("name", "x"), ("src", "a"))
    assert list(after["flowmap_seam_hops_total"]).count(key) == 1
    assert after["flowmap_seam_hops_total"][key] == 5
    assert {dict(k)["transport"] for k in after["flowmap_seam_transport_info"]
            if dict(k)["src"] == "a"} == {"pickle", "shm"}
    # AND once the program has ended, a series the run no longer has goes (stale, not lower)
    frames.append(dataclasses.replace(second, status=Status(EXITED, "exited")))
    _, end = _scrape(reg)
    assert end["flowmap_seam_hops_total"][key] == 5


def test_series_are_capped_with_an_other_bucket(tmp_path):
    # GIVEN a run of more destinations than series are kept
    n = MAX_SERIES + 50
    frame = _frame(tmp_path, "run", {("a", f"d{i}", "x"): [(4 * (i + 1), "ref")] for i in range(n)})
    _, got = _scrape(registry(lambda: frame))
    seams = got["flowmap_seam_bytes_total"]
    # THEN the first MAX_SERIES have series of their own and the rest sum under `other`
    assert len(seams) == MAX_SERIES + 1
    true = {f"d{i}": 4 * (i + 1) for i in range(n)}
    own = {dict(k)["dst"]: v for k, v in seams.items() if dict(k)["dst"] != OTHER}
    assert all(true[dst] == v for dst, v in own.items())
    other = seams[(("dst", OTHER), ("name", OTHER), ("src", OTHER))]
    assert other == sum(v for dst, v in true.items() if dst not in own) > 0
    assert len(got["flowmap_owner_in_bytes_total"]) == MAX_SERIES + 1
    assert len(got["flowmap_seam_transport_info"]) == MAX_SERIES
