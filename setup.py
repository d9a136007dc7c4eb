"""Build hook for the OPTIONAL compiled scanner (``specdiag/ingest/_scan.c``).

Everything else is configured in ``pyproject.toml``. Where no C compiler (or no Python headers) is
available the build of the extension fails, this hook says so in one warning, and the install goes on:
``specdiag.ingest.scan`` then uses its pure-Python reference. ``SPECDIAG_NO_EXT=1`` skips the extension;
``SPECDIAG_REQUIRE_EXT=1`` turns a failed build into an error (release wheels, CI's speed checks).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that treats a failure to compile the scanner as "use the Python fallback"."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any toolchain failure means: no extension
            self._skip(e)

    def build_extension(self, ext: Extension) -> None:
        if self.compiler.compiler_type == "unix":
            ext.extra_compile_args = [*ext.extra_compile_args, "-O3", "-std=c99"]
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            self._skip(e)

    def _skip(self, err: Exception) -> None:
        if os.environ.get("SPECDIAG_REQUIRE_EXT") == "1":
            raise err
        print(f"warning: specdiag's compiled scanner was not built ({type(err).__name__}: {err}); "
              "using the pure-Python scanner", file=sys.stderr)


ext_modules = [] if os.environ.get("SPECDIAG_NO_EXT") == "1" else [
    Extension("specdiag.ingest._scan", ["specdiag/ingest/_scan.c", "specdiag/ingest/_prefilter.c"]),
]

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
