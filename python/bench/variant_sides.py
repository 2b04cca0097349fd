# SPDX-License-Identifier: Apache-2.0
"""The sides of a variant benchmark (variant_bench.py, fp8_bench.py
--variants): NAME=TUNING_TABLE arguments, and whether the kernel a side
served is the one its variant names.  No torch here, so that the checks
run in CI (tests/variant_sides_test.py)."""
import sys


def variant_tables(specs, script):
    """[(name, table or None)] of NAME=TUNING_TABLE arguments (NAME= for the
    shipped tables alone, NAME=@KERNEL kept as "@KERNEL"); exits naming a
    malformed one."""
    out = []
    for v in specs:
        name, eq, table = v.partition("=")
        if not eq or not name:
            sys.exit(f"{script}: {v!r}: expected NAME=TUNING_TABLE or NAME=")
        out.append((name, table or None))
    return out


def table_kernels(path):
    """The kernels a tuning table's entries name (the word after "->")."""
    with open(path) as f:
        return {line.split("->", 1)[1].split()[0] for line in f
                if "->" in line and not line.startswith("#")}


# How kiln_last_call's reason begins when a tuning table's entry served the
# call (runtime/dispatch.c: the exact class, or the nearest measured one).
TABLE_RULES = ("exact table:", "nearest class ")


def not_served(table, kernel, reason=None):
    """Why a side of variant `table` (variant_tables' form) did not run a
    kernel the variant names, or None.  Dispatch serves a table's entry only
    where its cubin is in the bundle or the cache; otherwise it falls to the
    shipped choice, which would then be timed under the variant's name.
    With `reason` (kiln_last_call's), a table side must also have been
    served by one of its table's entries (the call's class, or the nearest
    measured one): a whole table whose entry's kernel left the catalog
    falls to the model's choice, which that table may name for other
    classes (sixty-sixth session)."""
    if table is None:
        return None
    if table.startswith("@"):
        return None if kernel == table[1:] else f"served {kernel}, not {table[1:]}"
    if kernel not in table_kernels(table):
        return f"served {kernel}, which {table} does not name (its cubin missing, or no entry)"
    if reason is not None and not reason.startswith(TABLE_RULES):
        return (f"served {kernel} by \"{reason.split(':')[0]}\", not by an entry of {table} "
                "(the entry's kernel not in the catalog or the cache, or no entry)")
    return None
