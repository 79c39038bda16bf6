"""Package discovery for the one import root `flowmap`.

The repo keeps `trainer/` and `cli/` at the top for readability; installed they
live under `flowmap.trainer` and `flowmap.cli`, so they never collide with other
distributions' top-level `trainer` or `cli` packages. Static pyproject tables
cannot express "every subpackage of this folder, renamed", hence this file.

Every folder under a root ships, not only those with an `__init__.py`: data
folders (`reporters/assets`, `model/presets`) and `launch/boot`, whose
`sitecustomize.py` starts tracing in child processes, are namespace packages.
Listing only regular packages left the boot folder out of the wheel, so a regular
install traced no child.
"""

from setuptools import Extension, find_namespace_packages, setup

ROOTS = {"flowmap": "flowmap", "flowmap.cli": "cli", "flowmap.trainer": "trainer"}


def _shipped(sub: str) -> bool:
    """A folder ships unless it is a cache, not importable, or another root's tree."""
    parts = sub.split(".")
    return all(p.isidentifier() and p != "__pycache__" for p in parts) and parts[0] not in (
        "cli",
        "trainer",
    )


packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_namespace_packages(folder) if _shipped(sub)]

# The C twins of capture's hottest loops (flowmap/capture/describers/accel.py), and
# the SIGTERM refire (flowmap/capture/sigterm.py), the interned flag of a string and the
# walk for a hop's strings (flowmap/capture/text_identity.py), and the watch's profile hook
# (flowmap/discover/watch.py). Optional: where they cannot be
# compiled, the install goes on and capture runs the same loops in Python.
accel = [
    Extension(f"flowmap.{folder.replace('/', '.')}.{name}", [f"flowmap/{folder}/{name}.c"],
              optional=True)
    for folder, name in (("capture/describers", "cwalk"), ("capture/describers", "ccolumns"),
                         ("writer", "cids"), ("capture", "csigterm"), ("capture", "cinterned"),
                         ("capture", "ctext"), ("discover", "crelay"))
]

setup(packages=packages, package_dir=package_dir, ext_modules=accel)
