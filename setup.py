"""pip install . : the Python package `tarantella` (python/), offline, with Debian's setuptools.

    python3 -m pip install --no-build-isolation .

(--no-build-isolation: pip would otherwise download setuptools into a fresh build environment.)
The extension tarantella._tarantella links libtarantella, found in this order:
  1. $TARANTELLA_PREFIX (PREFIX/include/tarantella.h, PREFIX/lib/libtarantella.so), e.g. the
     prefix of `make install`;
  2. pkg-config tarantella (installed by `make install`);
  3. otherwise this checkout's library, built with CMake into build-pip/ and copied into the
     package (libtarantella.so.0 beside the extension, found through $ORIGIN).
The `tarantella` launcher is not part of the Python package: `make install` installs it.
"""
import glob
import os
import re
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "include", "tarantella.h")) as f:
        return re.search(r'#define TNT_VERSION_STRING "([^"]+)"', f.read()).group(1)


def pkg_config(*args):
    try:
        return subprocess.run(["pkg-config", *args, "tarantella"], capture_output=True, text=True,
                              check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


class BuildExt(build_ext):
    """Finds (or builds) libtarantella before compiling the extension against it."""

    def build_extension(self, ext):
        import numpy
        ext.include_dirs.append(numpy.get_include())
        prefix = os.environ.get("TARANTELLA_PREFIX")
        bundled = None
        if prefix:
            ext.include_dirs.append(os.path.join(prefix, "include"))
            ext.library_dirs.append(os.path.join(prefix, "lib"))
            ext.runtime_library_dirs.append(os.path.join(prefix, "lib"))
        elif pkg_config("--exists") is not None:
            for flag in pkg_config("--cflags"):
                if flag.startswith("-I"):
                    ext.include_dirs.append(flag[2:])
            for flag in pkg_config("--libs-only-L"):
                ext.library_dirs.append(flag[2:])
                ext.runtime_library_dirs.append(flag[2:])
        else:
            build = os.path.join(ROOT, "build-pip")
            subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DTNT_PYTHON=OFF"],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["cmake", "--build", build, "--target", "tnt_shared", "-j", str(os.cpu_count() or 2)],
                           check=True)
            ext.include_dirs.append(os.path.join(ROOT, "include"))
            ext.library_dirs.append(os.path.join(build, "lib"))
            ext.runtime_library_dirs.append("$ORIGIN")
            bundled = sorted(glob.glob(os.path.join(build, "lib", "libtarantella.so.*")), key=len)[0]
        super().build_extension(ext)
        if bundled:  # the library beside the extension, under its soname
            out = os.path.dirname(self.get_ext_fullpath(ext.name))
            shutil.copy2(bundled, os.path.join(out, os.path.basename(bundled)))


setup(
    name="tarantella",
    version=version(),
    description="Data-parallel training of Keras models on libtarantella (C, oneDNN, MPI)",
    long_description=open(os.path.join(ROOT, "README.md")).read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    install_requires=["numpy"],
    package_dir={"": "python"},
    packages=["tarantella", "tarantella.keras", "tarantella.keras.optimizers", "tarantella.keras.datasets",
              "tarantella.keras.utils", "tarantella.keras.preprocessing", "tarantella.keras.applications",
              "tarantella.keras.wrappers"],
    ext_modules=[Extension("tarantella._tarantella", sources=sorted(glob.glob("python/src/*.c")),
                           depends=["python/src/pytnt.h", "include/tarantella.h", "include/tarantella_layers.h", "include/tarantella_ops.h",
                                    "include/tarantella/data.h"],
                           libraries=["tarantella"], extra_compile_args=["-std=c11", "-D_GNU_SOURCE"])],
    cmdclass={"build_ext": BuildExt},
    options={"build": {"build_base": "build-pip/setuptools"}},  # build/ is CMake's
    zip_safe=False,
)
