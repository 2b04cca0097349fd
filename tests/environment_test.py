#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""python/bench/environment.py: variables set for a with block, and the
environment as it was after it, an exception or not."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "bench"))

from environment import environment  # noqa: E402

A, B, C = "KILN_ENV_TEST_A", "KILN_ENV_TEST_B", "KILN_ENV_TEST_C"


class Environment(unittest.TestCase):
    def setUp(self):
        os.environ[A] = "a0"     # set before: changed, then restored
        os.environ[B] = "b0"     # set before: unset, then restored
        os.environ.pop(C, None)  # unset before: set, then unset again

    def tearDown(self):
        for name in (A, B, C):
            os.environ.pop(name, None)

    def after(self):
        self.assertEqual(os.environ.get(A), "a0")
        self.assertEqual(os.environ.get(B), "b0")
        self.assertNotIn(C, os.environ)

    def test_set_and_restored(self):
        with environment({A: "a1", B: None, C: ""}):
            self.assertEqual(os.environ.get(A), "a1")
            self.assertNotIn(B, os.environ)
            self.assertEqual(os.environ.get(C), "")   # empty is a value; None unsets
        self.after()

    def test_restored_after_an_exception(self):
        with self.assertRaises(KeyError):
            with environment({A: "a1", C: "c1"}):
                raise KeyError("inside")
        self.after()

    def test_nothing_to_set(self):
        with environment({}):
            self.assertEqual(os.environ.get(A), "a0")
        self.after()


if __name__ == "__main__":
    unittest.main()
