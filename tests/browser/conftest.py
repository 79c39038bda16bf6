"""The browser tests' one fixture: a headless Chromium per test module, over DevTools."""

from __future__ import annotations

import pytest
from browser.chromium import Browser, find_chromium


@pytest.fixture(scope="module")
def browser():
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)")
    with Browser(chromium) as b:
        yield b
