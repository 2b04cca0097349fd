# SPDX-License-Identifier: Apache-2.0
"""Other builds of libkiln in the same process, for benchmarks that time a
build against another (a template change against the tree) side by side:
alternating rounds and held-alone runs in one process, where builds timed
in separate processes meet the card in different states.

Each copy is kiln's ctypes layer (python/kiln/_lib.py) executed again as a
module of its own, bound to the library at PATH ($KILN_LIBRARY while it
loads).  ctypes opens each file with RTLD_LOCAL, so two files are two
libraries with their own state; the same file twice is one.  A problem
(new_problem) belongs to the copy that made it: pass it to that copy's
Context only.  No torch here, so that the checks run in CI
(tests/lib_copies_test.py)."""
import importlib.util
import os
import pathlib
import sys

from environment import environment

_LIB_PY = pathlib.Path(__file__).resolve().parents[1] / "kiln" / "_lib.py"
_loaded = {}


def load(path):
    """kiln's ctypes layer bound to the libkiln at path (a module; loaded
    once per file)."""
    path = str(pathlib.Path(path).resolve())
    if path in _loaded:
        return _loaded[path]
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such library")
    spec = importlib.util.spec_from_file_location(f"kiln_lib_copy_{len(_loaded)}", _LIB_PY)
    mod = importlib.util.module_from_spec(spec)
    with environment({"KILN_LIBRARY": path}):
        spec.loader.exec_module(mod)
    _loaded[path] = mod
    return mod


def parse(text, script):
    """{TAG: module} of "TAG=PATH,..." (--libs); exits naming a malformed
    or missing one."""
    out = {}
    for item in filter(None, text.split(",")):
        tag, eq, path = item.partition("=")
        if not eq or not tag or not path:
            sys.exit(f"{script}: --libs {item!r}: expected TAG=PATH")
        if tag in out:
            sys.exit(f"{script}: --libs: tag {tag!r} given twice")
        try:
            out[tag] = load(path)
        except (OSError, ImportError) as e:
            sys.exit(f"{script}: --libs {item!r}: {e}")
    return out


def split_side(name, libs, script):
    """A side's name without its #TAG, and the module it runs on (None: the
    default one); exits naming an unknown tag."""
    base, hash_, tag = name.rpartition("#")
    if not hash_:
        return name, None
    if tag not in libs:
        sys.exit(f"{script}: side {name!r}: no --libs tag {tag!r}")
    return base, libs[tag]
