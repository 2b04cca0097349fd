#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""python/bench/lib_copies.py: two builds of libkiln side by side in one
process, each behind its own copy of the ctypes layer, a problem bound to
the copy that made it.  No GPU: loading the library and making problems
need no driver.  argv[1]: the built libkiln.so."""
import ctypes
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "bench"))

import lib_copies  # noqa: E402

LIBKILN = None


class LibCopies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        # two files: two libraries (RTLD_LOCAL), as two builds would be
        cls.a = os.path.join(cls.dir, "a", "libkiln.so")
        cls.b = os.path.join(cls.dir, "b", "libkiln.so")
        for p in (cls.a, cls.b):
            os.makedirs(os.path.dirname(p))
            shutil.copyfile(LIBKILN, p)
        cls.link = os.path.join(cls.dir, "link.so")
        os.symlink(cls.a, cls.link)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def test_two_files_two_libraries(self):
        old = os.environ.get("KILN_LIBRARY")
        ma, mb = lib_copies.load(self.a), lib_copies.load(self.b)
        self.assertEqual(os.environ.get("KILN_LIBRARY"), old)   # restored after each load
        self.assertIsNot(ma, mb)
        self.assertEqual(str(ma.library_path), self.a)
        self.assertEqual(str(mb.library_path), self.b)
        self.assertNotEqual(ma._lib._handle, mb._lib._handle)
        self.assertEqual(ma.version, mb.version)
        # the same file again (by another name too) is the same module
        self.assertIs(lib_copies.load(self.a), ma)
        self.assertIs(lib_copies.load(self.link), ma)

    def test_a_problem_belongs_to_its_copy(self):
        ma, mb = lib_copies.load(self.a), lib_copies.load(self.b)
        pa, pb = ma.new_problem(ma.OP_FPROP), mb.new_problem(mb.OP_DGRAD)
        self.assertEqual((pa.op, pb.op), (ma.OP_FPROP, mb.OP_DGRAD))
        # kiln_prepare takes its own copy's Problem only: another's is refused
        # before any call reaches the library
        with self.assertRaises(ctypes.ArgumentError):
            mb.kiln_prepare(None, ctypes.byref(pa))

    def test_missing_library(self):
        with self.assertRaises(FileNotFoundError):
            lib_copies.load(os.path.join(self.dir, "none.so"))

    def test_parse(self):
        libs = lib_copies.parse(f"new={self.a},old={self.b}", "t")
        self.assertEqual(sorted(libs), ["new", "old"])
        self.assertIs(libs["new"], lib_copies.load(self.a))
        self.assertEqual(lib_copies.parse("", "t"), {})
        for bad in ("new", "=x", f"new={self.a},new={self.b}", "x=/no/such/libkiln.so"):
            with self.assertRaises(SystemExit) as e:
                lib_copies.parse(bad, "t")
            self.assertIn("t: --libs", str(e.exception.code))

    def test_split_side(self):
        libs = {"new": lib_copies.load(self.a)}
        self.assertEqual(lib_copies.split_side("fprop@table", libs, "t"), ("fprop@table", None))
        # an environment value may hold slashes; the tag follows the last '#'
        self.assertEqual(lib_copies.split_side("k+s:KILN_CACHE_DIR=/tmp/x#new", libs, "t"),
                         ("k+s:KILN_CACHE_DIR=/tmp/x", libs["new"]))
        self.assertEqual(lib_copies.split_side("#new", libs, "t"), ("", libs["new"]))
        with self.assertRaises(SystemExit) as e:
            lib_copies.split_side("fprop@table#old", libs, "t")
        self.assertIn("no --libs tag 'old'", str(e.exception.code))


if __name__ == "__main__":
    LIBKILN = sys.argv.pop(1)
    unittest.main()
