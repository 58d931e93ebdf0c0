"""Builds the SWIG extension genie._capi against an installed libgenie.

The library is found through GENIE_LIBRARY_DIR / GENIE_INCLUDE_DIR when set
(a build tree: GENIE_LIBRARY_DIR=<build>, GENIE_INCLUDE_DIR=<source>/include),
else through `pkg-config genie`. Needs swig (4) and the Python headers.

    pip install --no-build-isolation bindings/python
"""

import os
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


def _pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "genie"], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("genie: libgenie not found: set GENIE_LIBRARY_DIR and GENIE_INCLUDE_DIR, "
                         f"or install Genie where pkg-config finds it ({e})")
    return shlex.split(out.stdout)


inc = os.environ.get("GENIE_INCLUDE_DIR")
lib = os.environ.get("GENIE_LIBRARY_DIR")
if lib:
    include_dirs = [inc] if inc else []
    library_dirs = [lib]
else:
    include_dirs = [f[2:] for f in _pkg_config("--cflags-only-I")]
    library_dirs = [f[2:] for f in _pkg_config("--libs-only-L")]

capi = Extension(
    "genie._capi",
    sources=["genie/capi.i"],
    swig_opts=["-threads"] + [f"-I{d}" for d in include_dirs],
    include_dirs=include_dirs,
    library_dirs=library_dirs,
    runtime_library_dirs=library_dirs,  # found at run time without LD_LIBRARY_PATH
    libraries=["genie"],
)


class BuildPyAfterExt(build_py):
    """SWIG writes genie/capi.py while building the extension: build it
    first so that build_py packages that file too."""

    def run(self):
        self.run_command("build_ext")
        super().run()


setup(ext_modules=[capi], cmdclass={"build_py": BuildPyAfterExt})
