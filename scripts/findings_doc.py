"""Regenerate the findings shown in docs/findings.md from the programs that give them.

Each kind's section shows one finding as `flowmap report` prints it (80
columns, as when piped). A hand-copied block goes stale the day a message
changes; this traces each program again and writes the printed lines back.

    .venv/bin/python scripts/findings_doc.py           # rewrite the blocks
    .venv/bin/python scripts/findings_doc.py --check   # exit 1 if any block is stale
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "findings.md"
# kind -> the program (and its arguments) whose report shows it
SOURCES: dict[str, list[str]] = {
    "heaviest": ["examples/grpo_tiny.py", "--steps", "4", "--set", "train.dtype=float64"],
    "pass_through": ["examples/field/pass_through.py"],
    "dropped": ["examples/field/stale_drop.py"],
    "padding": ["examples/field/padding.py"],
    "duplicate": ["examples/field/duplicate.py"],
    "serialisation": ["examples/field/serialisation_json.py"],
    "view": ["examples/field/view_storage.py"],
    "chatty": ["examples/field/chatty.py"],
    "prefix_resend": ["examples/field/prefix_resend.py"],
    "wide_ids": ["examples/field/wide_ids.py"],
}
FINDING = re.compile(r"^\s+\S.*\s\[([\w-]+)\] ")


def printed(kind: str, program: list[str], tmp: Path) -> str:
    """The lines of the first `kind` finding in the program's report."""
    run = tmp / kind
    flowmap = [sys.executable, "-m", "flowmap"]
    subprocess.run([*flowmap, "trace", "-o", str(run), *program], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    report = subprocess.run([*flowmap, "report", str(run)], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    out: list[str] = []
    table = report[report.find("\nFindings"):].split("\n\n")[0]
    for line in table.splitlines():
        m = FINDING.match(line)
        if m:
            if out:
                break
            if m.group(1).replace("-", "_") == kind:
                out.append(line)
        elif out:
            out.append(line)
    if not out:
        raise SystemExit(f"{' '.join(program)} printed no `{kind}` finding")
    return "\n".join(out)


def main() -> int:
    check = "--check" in sys.argv[1:]
    doc = DOC.read_text()
    new = doc
    with tempfile.TemporaryDirectory() as tmp:
        for kind, program in SOURCES.items():
            section = re.search(rf"^## `{kind}`\n.*?^```\n(.*?)^```\n", new, re.S | re.M)
            if section is None:
                raise SystemExit(f"docs/findings.md has no block under `## {kind}`")
            block = printed(kind, program, Path(tmp)) + "\n"
            new = new[:section.start(1)] + block + new[section.end(1):]
    if check:
        if new != doc:
            print("docs/findings.md shows findings flowmap no longer prints: "
                  "run scripts/findings_doc.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
