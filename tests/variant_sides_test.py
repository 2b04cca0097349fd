#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""python/bench/variant_sides.py: a variant's side is timed only where it
served a kernel its variant names (a table whose entry's cubin is missing
falls to the shipped choice; fiftieth session, docs/benchmarks.md)."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "bench"))

from variant_sides import not_served, table_kernels, variant_tables  # noqa: E402

ENTRY = ("sm_90a fprop e4m3 e4m3 bf16 plain t1024.g32.n4096.k8192 -> {k} "
         "0000 0000 1.0 other 1.1 name={k}\n")


class VariantSides(unittest.TestCase):
    def setUp(self):
        fd, self.table = tempfile.mkstemp(suffix=".tuning")
        with os.fdopen(fd, "w") as f:
            f.write("kiln-tuning 1\n# a comment naming -> not_a_kernel\n")
            f.write(ENTRY.format(k="kern_a"))
            f.write(ENTRY.format(k="kern_b"))

    def tearDown(self):
        os.unlink(self.table)

    def test_table_kernels(self):
        self.assertEqual(table_kernels(self.table), {"kern_a", "kern_b"})

    def test_shipped_table_names_its_kernels(self):
        shipped = os.path.join(ROOT, "specs", "tuning", "sm_90a.tuning")
        names = table_kernels(shipped)
        self.assertIn("fprop_sm90_bf16_plain__m64_n256_k64_s4_rgroup_pingpong", names)
        self.assertNotIn("->", names)

    def test_table_side(self):
        self.assertIsNone(not_served(self.table, "kern_b"))
        why = not_served(self.table, "sm90_fprop_e4m3_row_64x256")
        self.assertIn("sm90_fprop_e4m3_row_64x256", why)
        self.assertIn(self.table, why)
        self.assertIsNotNone(not_served(self.table, "not_a_kernel"))

    def test_table_side_served_by_its_entry(self):
        """A table naming the served kernel for some class still must have
        served the call through an entry: the model's fallback is refused."""
        exact = "exact table: tuned kernel kern_b for t1024.g32.n4096.k8192 (measured 1.000 ms)"
        self.assertIsNone(not_served(self.table, "kern_b", exact))
        nearest = "nearest class t1024.g32.n4096.k8192 (0.50 octaves from the call): kernel kern_b"
        self.assertIsNone(not_served(self.table, "kern_b", nearest))
        why = not_served(self.table, "kern_b", "model score: kern_b (sm90 64x256x128) est 1.0 us")
        self.assertIn('by "model score"', why)
        self.assertIn(self.table, why)
        self.assertIsNone(not_served(None, "kern_b", "model score: kern_b"))
        self.assertIsNone(not_served("@kern_b", "kern_b", "model score: kern_b"))

    def test_forced_and_shipped_sides(self):
        self.assertIsNone(not_served("@kern_a", "kern_a"))
        self.assertIn("not kern_a", not_served("@kern_a", "kern_b"))
        self.assertIsNone(not_served(None, "anything"))

    def test_variant_tables(self):
        self.assertEqual(variant_tables(["new=t.tuning", "old=", "k=@kern"], "x"),
                         [("new", "t.tuning"), ("old", None), ("k", "@kern")])
        with self.assertRaises(SystemExit):
            variant_tables(["=t.tuning"], "x")


if __name__ == "__main__":
    unittest.main()
