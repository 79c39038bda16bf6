"""Seam maps: trace code you cannot edit by naming its seams in a YAML file.

    flowmap trace --seams seams.yaml train.py
    flowmap trace --preset trl train.py

`activate` loads the files, patches every target (now, or when its module is
imported), and exports `FLOWMAP_SEAMS` so that traced child processes load the
same maps at start-up (`activate_from_environment`, called as a child starts
tracing). The process that activated with `report=True` ends the run with one
warning per target that no process of the run managed to patch
(`report_unresolved`, called where the run ends: `flowmap.launch.end_run`).
"""

from __future__ import annotations

import os
import sys

from flowmap import environment
from flowmap.seams.loader import SeamMapError, load_seam_map, parse_seam_map
from flowmap.seams.patcher import Patcher
from flowmap.seams.presets import available as available_presets
from flowmap.seams.presets import preset_path
from flowmap.seams.spec import ExtraHop, SeamMap, SeamSpec

ENV_SEAMS = environment.SEAMS
# One line per target outcome, appended by every process of the run, so the
# process that reports can tell a target patched in a worker from one that
# never appeared anywhere.
OUTCOME_LOG = "seam-targets.log"

__all__ = [
    "ENV_SEAMS",
    "ExtraHop",
    "Patcher",
    "SeamMap",
    "SeamMapError",
    "SeamSpec",
    "activate",
    "activate_from_environment",
    "available_presets",
    "load_seam_maps",
    "load_seam_map",
    "parse_seam_map",
    "preset_path",
    "report_unresolved",
]


def load_seam_maps(paths: list[str]) -> SeamMap:
    """Load and merge several seam-map files; a target mapped twice is an error."""
    merged = SeamMap()
    seen: dict[str, str] = {}
    for path in paths:
        one = load_seam_map(path)
        for spec in one.seams:
            if spec.target in seen:
                raise SeamMapError(f"{spec.where}: target {spec.target} is already mapped "
                                   f"at {seen[spec.target]}")
            seen[spec.target] = spec.where
        merged.extend(one)
    return merged


def activate(paths: list[str], *, report: bool = True, run_dir: str | None = None) -> Patcher:
    """Patch the targets of the seam maps at `paths` in this process and its future children.

    Raises `SeamMapError` (exit status 2) for a malformed file, before anything is patched.
    """
    paths = [os.path.abspath(p) for p in paths]
    seam_map = load_seam_maps(paths)
    os.environ[ENV_SEAMS] = os.pathsep.join(paths)
    run_dir = run_dir or environment.get(environment.RUN_DIR)
    patcher = Patcher(seam_map, _outcome_logger(run_dir), warn=report)
    patcher.install()
    return patcher


def activate_from_environment() -> Patcher | None:
    """In a traced child: load the seam maps the parent named in `FLOWMAP_SEAMS`."""
    value = environment.get(ENV_SEAMS)
    if not value:
        return None
    try:
        return activate([p for p in value.split(os.pathsep) if p], report=False)
    except Exception as exc:
        sys.stderr.write(f"flowmap: seam maps not loaded in this process ({exc}).\n")
        return None


def _outcome_logger(run_dir: str | None):  # type: ignore[no-untyped-def]
    if not run_dir:
        return None
    path = os.path.join(run_dir, OUTCOME_LOG)

    def log(target: str, why: str | None) -> None:
        line = f"patched\t{target}\n" if why is None else f"failed\t{target}\t{why}\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    return log


def report_unresolved(patcher: Patcher, run_dir: str | None) -> None:
    """One warning per target that no process of the run patched (by the process that
    activated with `report=True`, as the run ends)."""
    missing = patcher.unresolved()
    if not missing:
        return
    for target, why in _outcomes(run_dir).items():
        if why is None:
            missing.pop(target, None)
        elif target in missing and "never imported" in missing[target]:
            missing[target] = why
    for target, why in missing.items():
        sys.stderr.write(f"flowmap: warning: seam-map target {target} never appeared "
                         f"({why}); its seam was not recorded.\n")
    sys.stderr.flush()


def _outcomes(run_dir: str | None) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    if not run_dir:
        return out
    try:
        with open(os.path.join(run_dir, OUTCOME_LOG), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if parts[0] == "patched" and len(parts) >= 2:
                    out[parts[1]] = None
                elif parts[0] == "failed" and len(parts) >= 3 and out.get(parts[1], "") is not None:
                    out[parts[1]] = parts[2]
    except OSError:
        pass
    return out
