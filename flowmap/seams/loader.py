"""Read a seam-map YAML file into `SeamMap`, or fail with the line at fault.

The file is composed into PyYAML's node tree (safe loader: no tags that run
code) rather than loaded into plain dicts, because every node keeps its
position: a mistake is reported as `FILE:LINE: what is wrong`, and the CLI
turns that into exit status 2 before the user's program starts.
"""

from __future__ import annotations

import keyword
import os
import re
from typing import Any

import yaml

from flowmap.errors import UsageError
from flowmap.safe_read import check_yaml, read_text
from flowmap.seams.spec import TRANSPORTS, ExtraHop, SeamMap, SeamSpec

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_TARGET = re.compile(rf"^({_IDENT}(?:\.{_IDENT})*):({_IDENT}(?:\.{_IDENT})*)$")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_PATH = re.compile(rf"^{_IDENT}(?:\.(?:{_IDENT}|[0-9]+|\*))*$")
# A `dims` key is a leaf path as flowmap reports it: tuple items and folded lists in brackets.
_LEAF_PATH = re.compile(rf"^{_IDENT}(?:\.(?:{_IDENT}|[0-9]+)|\[(?:[0-9]+|\*)\])*$")

SEAM_KEYS = {
    "target", "owner", "args", "call", "result", "name", "result_name", "caller",
    "items", "dims", "transport", "step", "also", "optional", "split_by",
}
EXTRA_KEYS = {"payload", "src", "dst", "name"}
TOP_KEYS = {"version", "seams"}


def expand_owner(value: str) -> str:
    """`trainer/rank${RANK}` -> `trainer/rank1` in rank 1: each process loads the map
    itself, so one file names every rank's owner. `${VAR:-default}` covers processes
    without the variable; an unset variable without a default stays as written."""

    def sub(m: re.Match[str]) -> str:
        value = os.environ.get(m.group(1))
        if value is not None:
            return value
        return m.group(2) if m.group(2) is not None else m.group(0)

    return _ENV.sub(sub, value)


class SeamMapError(UsageError):
    """A seam-map file that cannot be read or says something invalid (exit status 2)."""


def load_seam_map(path: str) -> SeamMap:
    """Parse and validate the seam map at `path`."""
    try:
        text = read_text(path, "seam map")
    except OSError as exc:
        raise SeamMapError(f"cannot read the seam map {path}: {exc.strerror or exc}") from None
    except UsageError as exc:
        raise SeamMapError(str(exc)) from None
    return parse_seam_map(text, os.path.abspath(path))


def load_shipped_map(path: str) -> SeamMap:
    """A seam map shipped with flowmap (a preset): ours and tested, so it skips the guard
    against hostile YAML and composes with libyaml where present (35 ms less at every
    start of `flowmap trace`, which reads the presets' step functions)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_seam_map(text, path, trusted=True)


def parse_seam_map(text: str, source: str = "<seam map>", trusted: bool = False) -> SeamMap:
    """Parse seam-map YAML text; `source` names it in error messages. Text that is not
    `trusted` (the user's) is checked first for YAML that would hang or exhaust the parser."""
    if not trusted:
        try:
            check_yaml(text, source, "seam map")
        except UsageError as exc:
            raise SeamMapError(str(exc)) from None
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader) if trusted
                            else yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise SeamMapError(f"{source}:{line}: not valid YAML ({exc.problem or exc})") from None
    except yaml.YAMLError as exc:
        raise SeamMapError(f"{source}: not valid YAML ({exc})") from None
    except RecursionError:
        raise SeamMapError(f"{source}: nested too deep") from None
    return _Reader(source).read(root)


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, node: yaml.Node | None, message: str) -> SeamMapError:
        line = node.start_mark.line + 1 if node is not None else 1
        return SeamMapError(f"{self.source}:{line}: {message}")

    # -- node helpers ---------------------------------------------------------
    def mapping(self, node: yaml.Node, what: str, allowed: set[str]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping of keys to values")
        out: dict[str, yaml.Node] = {}
        for k, v in node.value:
            key = self.scalar(k, "a key")
            if key in out:
                raise self.fail(k, f"`{key}` is given twice in {what}")
            if key not in allowed:
                raise self.fail(k, f"unknown key `{key}` in {what}; expected one of "
                                   f"{', '.join(sorted(allowed))}")
            out[key] = v
        return out

    def scalar(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be a single value")
        return str(node.value)

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.scalar(node, what).strip()
        if not value or node.tag != "tag:yaml.org,2002:str":
            raise self.fail(node, f"{what} must be a non-empty string")
        return value

    def boolean(self, node: yaml.Node, what: str) -> bool:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            raise self.fail(node, f"{what} must be true or false")
        return str(node.value).lower() in ("true", "yes", "on", "y")

    def owner(self, node: yaml.Node, what: str) -> str:
        return expand_owner(self.string(node, what))

    def path(self, node: yaml.Node, what: str) -> str:
        value = self.string(node, what)
        if not _PATH.match(value):
            raise self.fail(node, f"{what} `{value}` is not a dotted path such as batch.uid")
        return value

    def leaf_path(self, node: yaml.Node) -> str:
        value = self.string(node, "a dims path")
        if not _LEAF_PATH.match(value):
            raise self.fail(node, f"a dims path `{value}` is not a leaf path such as "
                                  "batch.input_ids, result or result[0]")
        return value

    def string_list(self, node: yaml.Node, what: str) -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list, e.g. [batch, tokens]")
        return tuple(self.string(v, f"each entry of {what}") for v in node.value)

    # -- the document ---------------------------------------------------------
    def read(self, root: yaml.Node | None) -> SeamMap:
        if root is None:
            raise self.fail(None, "the seam map is empty; it needs a `seams:` list")
        top = self.mapping(root, "the seam map", TOP_KEYS)
        if "version" in top and self.scalar(top["version"], "version") != "1":
            raise self.fail(top["version"], "this flowmap reads seam maps of version 1")
        seams_node = top.get("seams")
        if seams_node is None:
            raise self.fail(root, "the seam map needs a `seams:` list")
        if not isinstance(seams_node, yaml.SequenceNode):
            raise self.fail(seams_node, "`seams` must be a list of seams (`- target: ...`)")
        seams: list[SeamSpec] = []
        first_line: dict[str, int] = {}
        for node in seams_node.value:
            spec = self.seam(node)
            if spec.target in first_line:
                raise self.fail(node, f"target {spec.target} is mapped twice "
                                      f"(first on line {first_line[spec.target]})")
            first_line[spec.target] = spec.line
            seams.append(spec)
        return SeamMap(seams, [self.source])

    def seam(self, node: yaml.Node) -> SeamSpec:
        m = self.mapping(node, "a seam", SEAM_KEYS)
        for required in ("target", "owner"):
            if required not in m:
                raise self.fail(node, f"a seam needs `{required}`")
        target = self.string(m["target"], "target")
        match = _TARGET.match(target)
        if not match:
            raise self.fail(m["target"], f"target `{target}` is not `package.module:function` "
                                         "or `package.module:Class.method`")
        module, qualname = match.groups()
        name = self.string(m["name"], "name") if "name" in m else qualname.rsplit(".", 1)[-1]
        args = None
        if "args" in m and not _is_null(m["args"]):
            args = self.string_list(m["args"], "args")
            for a, n in zip(args, m["args"].value, strict=True):
                if not a.isidentifier() or keyword.iskeyword(a):
                    raise self.fail(n, f"argument name `{a}` is not a Python identifier")
        transport = self.string(m["transport"], "transport") if "transport" in m else "ref"
        if transport not in TRANSPORTS:
            raise self.fail(m["transport"], f"transport `{transport}` is not one of "
                                            f"{', '.join(TRANSPORTS)}")
        return SeamSpec(
            target=target,
            module=module,
            qualname=qualname,
            owner=self.owner(m["owner"], "owner"),
            name=name,
            result_name=self.string(m["result_name"], "result_name") if "result_name" in m else name,
            args=args,
            call=self.boolean(m["call"], "call") if "call" in m else True,
            result=self.boolean(m["result"], "result") if "result" in m else True,
            caller=self.owner(m["caller"], "caller") if "caller" in m else None,
            items=self.path(m["items"], "items") if "items" in m else None,
            dims=self.dims(m["dims"]) if "dims" in m else {},
            transport=transport,
            step=self.path(m["step"], "step") if "step" in m else None,
            also=self.also(m["also"]) if "also" in m else (),
            optional=self.boolean(m["optional"], "optional") if "optional" in m else False,
            split_by=self.split_by(m["split_by"]) if "split_by" in m else (),
            source=self.source,
            line=node.start_mark.line + 1,
        )

    def split_by(self, node: yaml.Node) -> tuple[str, ...]:
        names = self.string_list(node, "split_by")
        for a, n in zip(names, node.value, strict=True):
            if not a.isidentifier() or keyword.iskeyword(a):
                raise self.fail(n, f"split_by `{a}` is not an argument name, self or grad")
        return names

    def dims(self, node: yaml.Node) -> dict[str, tuple[str, ...]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, "dims must map a payload path to dimension names, "
                                  "e.g. {batch.input_ids: [batch, tokens]}")
        out: dict[str, tuple[str, ...]] = {}
        for k, v in node.value:
            key = self.leaf_path(k)
            if key in out:
                raise self.fail(k, f"dims path `{key}` is given twice")
            out[key] = self.string_list(v, f"dims of {key}")
        return out

    def also(self, node: yaml.Node) -> tuple[ExtraHop, ...]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, "`also` must be a list of {payload, src, dst, name}")
        hops = []
        for n in node.value:
            m = self.mapping(n, "an `also` hop", EXTRA_KEYS)
            for required in sorted(EXTRA_KEYS):
                if required not in m:
                    raise self.fail(n, f"an `also` hop needs `{required}`")
            hops.append(ExtraHop(
                payload=self.path(m["payload"], "payload"),
                src=self.owner(m["src"], "src"),
                dst=self.owner(m["dst"], "dst"),
                name=self.string(m["name"], "name"),
                line=n.start_mark.line + 1,
            ))
        return tuple(hops)


def _is_null(node: Any) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"
