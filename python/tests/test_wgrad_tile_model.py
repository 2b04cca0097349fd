# SPDX-License-Identifier: Apache-2.0
"""python/bench/wgrad_tile_model.py prices a wgrad call from its group
sizes; the docs quote its ratios (docs/sm90_wgrad.md, hundred-and-third
session), so its arithmetic is checked here on sizes worked by hand.  No
torch, no GPU."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from wgrad_tile_model import tile_model  # noqa: E402


def test_one_tile_each_model():
    # one 128x256 tile; 64 tokens are four k16 steps, one k-block
    serial, overlap = tile_model(256, 128, [64], kblock_us=3.0, store_us=2.0, sms=1)
    assert serial == pytest.approx((3.0 + 2.0) / 1000)
    assert overlap == pytest.approx(3.0 / 1000)


def test_last_kblock_priced_by_its_k16_steps():
    # 17 tokens issue two k16 steps (half a k-block); the store then dominates the overlap model
    serial, overlap = tile_model(256, 128, [17], kblock_us=4.0, store_us=3.0, sms=1)
    assert serial == pytest.approx((2.0 + 3.0) / 1000)
    assert overlap == pytest.approx(3.0 / 1000)


def test_tiles_cover_partial_edges_and_spread_over_sms():
    # N 129 and K 257 need 2 x 2 tiles a group; two groups, an empty one still stores its tiles
    serial, overlap = tile_model(257, 129, [128, 0], kblock_us=1.0, store_us=0.5, sms=2)
    assert serial == pytest.approx(4 * ((2.0 + 0.5) + (0.0 + 0.5)) / 2 / 1000)
    assert overlap == pytest.approx(4 * (2.0 + 0.5) / 2 / 1000)
