"""Package discovery for the one import root `flowmap`.

The repo keeps `trainer/` and `cli/` at the top for readability; installed they
live under `flowmap.trainer` and `flowmap.cli`, so they never collide with other
distributions' top-level `trainer` or `cli` packages. Static pyproject tables
cannot express "every subpackage of this folder, renamed", hence this file.
"""

from setuptools import find_packages, setup

ROOTS = {"flowmap": "flowmap", "flowmap.cli": "cli", "flowmap.trainer": "trainer"}

packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    package_dir[name] = folder
    packages.append(name)
    for sub in find_packages(folder):
        if not any(sub == r or sub.startswith(r + ".") for r in ("cli", "trainer")):
            packages.append(f"{name}.{sub}")

setup(packages=packages, package_dir=package_dir)
