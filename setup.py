"""Build hook: everything is declared in pyproject.toml except the optional compiled
copies of the simulator's core and of the comparator's engine
(yarn_adapt/sim/native.py, rules/native.py), which mypyc builds when it and a C
compiler are at hand. Without them -- or with YARN_ADAPT_NATIVE=0 -- the package
installs as pure Python and gives the same results, more slowly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _native_build() -> Any:
    path = HERE / "yarn_adapt" / "sim" / "native_build.py"
    spec = importlib.util.spec_from_file_location("_yarn_adapt_native_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class OptionalBuildExt(build_ext):
    """A missing or failing C compiler leaves the pure-Python simulator in place."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            _native_build()._say(f"the C build failed ({exc})")

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _native_build()._say(f"{ext.name} did not compile ({exc})")


# Only commands that build code compile (pip also runs this file for metadata).
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}
extensions = _native_build().extensions(HERE) if BUILDS & set(sys.argv[1:]) else []
setup(ext_modules=extensions, cmdclass={"build_ext": OptionalBuildExt})
