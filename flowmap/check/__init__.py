"""Check: the CI gate on seam payloads — baseline, check, diff, budgets, pytest marker.

    snapshot.py    what a baseline records about a run (and both sides of a diff)
    baseline.py    the baseline file: sorted, diff-friendly JSON with a schema marker
    diff.py        seam and leaf differences between two snapshots, in words
    compare.py     the baseline rules: regressions, improvements, new and gone seams
    budget_file.py budget YAML, every mistake named by file and line
    budgets.py     absolute limits on seams, counters, dropped items, the total
    selectors.py   seam addresses `src -> dst : name`, roles and globs
    gate.py        the whole check in one call (CLI and pytest plugin)
    pytest_plugin.py  `@pytest.mark.flowmap_budget`

Their output formats (text, markdown, json, junit, github) are
`flowmap.reporters.check_formats`.

Reads the model only; never imports torch (tests/unit/test_check_no_torch.py).
"""
