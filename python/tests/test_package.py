# SPDX-License-Identifier: Apache-2.0
"""The part of the package that needs neither torch nor a GPU: loading the
library, the version, the struct mirrors, KilnError without a driver."""
import ctypes
import os
import pathlib
import re
import subprocess
import sys

import pytest

import kiln
from kiln import _lib

HEADER = pathlib.Path(__file__).resolve().parents[2] / "include" / "kiln.h"


def test_import_needs_no_torch():
    code = "import sys, kiln; kiln.__version__; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


def test_version_is_the_librarys():
    assert kiln.__version__ == _lib.kiln_version().decode()
    if HEADER.is_file():
        m = re.search(r'#define KILN_VERSION_STRING "([^"]+)"', HEADER.read_text())
        assert kiln.__version__ == m.group(1)
    try:
        from importlib.metadata import PackageNotFoundError, version
        assert version("kiln") == kiln.__version__
    except PackageNotFoundError:
        pass  # a source checkout: no installed distribution


def _driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is present")
def test_context_without_driver_raises_kiln_error():
    with pytest.raises(kiln.KilnError) as e:
        kiln.Context()
    assert e.value.status == "KILN_ERROR_DRIVER"
    assert "libcuda.so.1" in str(e.value)


def test_struct_mirrors_match_the_library():
    p = _lib.new_problem(_lib.OP_WGRAD)
    assert p.struct_size == ctypes.sizeof(_lib.Problem)
    assert p.op == _lib.OP_WGRAD and p.epilogue.alpha == 1.0 and p.groups == 0
    o = _lib._init_struct(_lib.ContextOptions, _lib.kiln_context_options_init)
    assert o.struct_size == ctypes.sizeof(_lib.ContextOptions)


def test_stale_mirror_is_refused():
    class Longer(ctypes.Structure):
        _fields_ = _lib.Problem._fields_ + [("extra", ctypes.c_int64)]

    with pytest.raises(kiln.KilnError, match="different kiln versions"):
        _lib._init_struct(Longer, _lib.kiln_problem_init, 0)


def test_status_names_agree():
    for code, name in _lib.STATUS_NAMES.items():
        assert _lib.kiln_status_name(code).decode() == name


def test_installed_package_ships_library_and_bundle():
    lib = pathlib.Path(kiln.library_path)
    pkg = pathlib.Path(kiln.__file__).parent
    if lib.parent.parent != pkg:
        pytest.skip(f"kiln runs from a source checkout ({lib})")
    if os.environ.get("KILN_EXPECT_BUNDLE") == "1":
        assert (pkg / "share" / "kiln" / "kiln-sm_90a.kbundle").is_file()
