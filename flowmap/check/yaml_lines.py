"""YAML that remembers where each key was written, so a config error can name its line.

PyYAML's SafeLoader builds plain dicts and forgets positions, and silently
keeps the last of two equal keys; a budget file needs both: the line of a
typo, and an error for a duplicated seam entry. Only the safe constructors
run, so loading a file never runs code.
"""

from __future__ import annotations

from typing import Any

import yaml


class Lines(dict[Any, Any]):
    """A mapping that remembers the line of each key (1-based)."""

    line: int = 0
    lines: dict[Any, int]


class LineList(list[Any]):
    line: int = 0
    lines: list[int]


class DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


class _Loader(yaml.SafeLoader):
    pass


def _map(loader: _Loader, node: yaml.MappingNode) -> Lines:
    loader.flatten_mapping(node)
    out = Lines()
    out.line, out.lines = node.start_mark.line + 1, {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=True)
        if key in out:
            raise DuplicateKey(key, knode.start_mark.line + 1)
        out[key] = loader.construct_object(vnode, deep=True)
        out.lines[key] = knode.start_mark.line + 1
    return out


def _seq(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(v, deep=True) for v in node.value)
    out.line, out.lines = node.start_mark.line + 1, [v.start_mark.line + 1 for v in node.value]
    return out


_Loader.add_constructor("tag:yaml.org,2002:map", _map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _seq)


def load_yaml(text: str) -> Any:
    """Parse `text`; raises DuplicateKey, or ValueError(line, problem) for invalid YAML."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise ValueError(line, getattr(exc, "problem", None) or "not valid YAML") from None
