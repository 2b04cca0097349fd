# SPDX-License-Identifier: Apache-2.0
"""python/bench/swap_summary.py reads kiln tune's CSV and context_ab.py's
rows (scripts/swap_trial.sh); the ratios it prints go into the docs, so
they are checked here on a made-up run.  No torch, no GPU."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import swap_summary  # noqa: E402

HEAD = ("variant,arch,op,epilogue,shape,groups,tokens_per_group,k,n,sizes,class,state,median_ms,"
        "tflops,rel_err,from_journal,winner,note,a,b,out\n")


def row(variant, shape, ms, state="timed"):
    return (f"{variant},sm_90a,dgrad,plain,{shape},160,154,5120,3072,uniform,t256.gmax.n4096.k8192,"
            f"{state},{ms},0,0,0,0,,bf16,bf16,bf16\n")


def test_swap_over_the_tables_kernel(tmp_path, capsys):
    (tmp_path / "tune_dgrad.csv").write_text(
        HEAD + row("sm90_dgrad_bf16_128x256", "a", 2.0) + row("sm90_dgrad_bf16_64x256", "a", 1.9)
        + row("dgrad_sm90_bf16_swap__m160_n128_k64_s6", "a", 1.5)
        + row("dgrad_sm90_bf16_swap__m224_n128_k64_s4", "a", 1.6)
        + row("dgrad_sm90_bf16_swap__m96_n256_k64_s4", "a", 0, state="wrong"))
    table = {("dgrad", "t256.gmax.n4096.k8192"): "sm90_dgrad_bf16_128x256"}
    # the table's kernel, not the faster 64x256, is the base; the best swap kernel is m160
    assert swap_summary.tune_rows(str(tmp_path), "dgrad", table) == [pytest.approx(0.75)]
    out = capsys.readouterr().out
    assert "m96_n256_k64_s4: wrong" in out and "m160_n128_k64_s6" in out and "x0.750" in out


def test_ab_rows(tmp_path, capsys):
    (tmp_path / "ab.log").write_text(
        "sides: as is, #cur, torch; time over the first's\n"
        "  dsv2_fc1_bal     dgrad   400.0 TFLOP/s  as is 1.5000 ms x1.000  #cur 2.0000 ms x1.333"
        "  torch 1.8000 ms x1.200  dgrad_sm90_bf16_swap__m160_n128_k64_s6\n"
        "  dsv3_fc1_skew dgrad: WRONG, relative error 3.1e-01\n")
    swap_summary.ab_rows(str(tmp_path))
    out = capsys.readouterr().out
    assert "cur x1.333" in out and "torch x1.200" in out and "torch over cur x0.900" in out
    assert "WRONG" in out


def test_the_shipped_tables_plain_entries():
    table = swap_summary.table_kernels(swap_summary.TABLE)
    assert table[("dgrad", "t256.gmax.n4096.k8192")].startswith("sm90_dgrad_bf16_")
