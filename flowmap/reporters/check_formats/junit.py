"""JUnit XML: one test case per seam (and per budget line), for CI test-report panes.

GitLab, Jenkins and most CI systems show JUnit results natively, so a seam
regression appears next to failing unit tests, named by its seam.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from flowmap.check.result import CheckReport, Result


def render_check(report: CheckReport) -> str:
    root = ET.Element("testsuites", name="flowmap")
    for group in ("baseline", "budget"):
        results = [r for r in report.results if r.group == group]
        if results:
            root.append(_suite(f"flowmap.{group}", results))
    _count(root, report.results)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(name: str, results: list[Result]) -> ET.Element:
    suite = ET.Element("testsuite", name=name)
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=name, name=r.title, time="0")
        body = "\n".join([r.summary, *r.details])
        if r.failed:
            ET.SubElement(case, "failure", message=r.summary, type="regression").text = body
        elif r.status == "gone":
            ET.SubElement(case, "skipped", message=r.summary)
        else:
            ET.SubElement(case, "system-out").text = body
    _count(suite, results)
    return suite


def _count(el: ET.Element, results: list[Result]) -> None:
    el.set("tests", str(len(results)))
    el.set("failures", str(sum(r.failed for r in results)))
    el.set("errors", "0")
    el.set("skipped", str(sum(r.status == "gone" for r in results)))
