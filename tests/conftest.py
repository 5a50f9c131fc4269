"""Shared test helpers: where the read-only real fixtures live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BSDKM_SHARED", ROOT.parent / "shared")).resolve()
FIXTURES = SHARED / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"real fixtures not found at {FIXTURES} (set BSDKM_SHARED)")
    return FIXTURES


def fixture_text(rel: str) -> str:
    return (FIXTURES / rel).read_text(encoding="utf-8", errors="replace")
