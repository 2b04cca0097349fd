# SPDX-License-Identifier: Apache-2.0
"""The benchmark scripts' imports from each other resolve: every name a
script takes with `from MODULE import NAME` from another script of
python/bench or bench/ is defined (or imported) at that module's top level.
The scripts need torch and a GPU to run, so CI never imports them; a name
moved out of one of them (bf16_bench.reference, the ninety-ninth session)
broke variant_bench.py and power_clock.py without a test noticing.  Read
with ast, no torch needed."""
import ast
import glob
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DIRS = [os.path.join(ROOT, "python", "bench"), os.path.join(ROOT, "bench")]


def scripts():
    return {os.path.splitext(os.path.basename(p))[0]: p
            for d in DIRS for p in sorted(glob.glob(os.path.join(d, "*.py")))}


def top_level_names(path):
    """Names a module binds at its top level (defs, classes, assignments,
    imports), including those under top-level if/try blocks."""
    names = set()

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            names.add(n.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    names.add((a.asname or a.name).split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(node.body)
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
    with open(path) as f:
        visit(ast.parse(f.read(), path).body)
    return names


def missing_imports():
    mods = scripts()
    defined = {m: top_level_names(p) for m, p in mods.items()}
    bad = []
    for m, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in mods:
                for a in node.names:
                    if a.name != "*" and a.name not in defined[node.module]:
                        bad.append("%s:%d imports %s from %s, which has no such name"
                                   % (os.path.relpath(path, ROOT), node.lineno, a.name,
                                      node.module))
    return bad


def test_bench_scripts_import_names_that_exist():
    assert len(scripts()) >= 10, "the benchmark scripts were not found"
    bad = missing_imports()
    assert not bad, "\n".join(bad)


def test_a_missing_name_is_found(tmp_path, monkeypatch):
    # the check itself can fail: a script importing a name its neighbour lacks
    (tmp_path / "aaa_mod.py").write_text("def here():\n    pass\n")
    (tmp_path / "aaa_user.py").write_text("from aaa_mod import here, gone\n")
    monkeypatch.setattr(sys.modules[__name__], "DIRS", DIRS + [str(tmp_path)])
    bad = missing_imports()
    assert len(bad) == 1 and "imports gone from aaa_mod" in bad[0], bad
