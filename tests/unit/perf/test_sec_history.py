"""The perf history store against names a PR's worker wrote: no path outside the store, and a
database history without SQLAlchemy says which extra brings it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_perf import repeats, run

from buildbot_bsdkm.model import to_json
from buildbot_bsdkm.perf.store import DirStore, SqlStore, StoreError

ROOT = Path(__file__).resolve().parents[3]
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"


def files_under(d: Path) -> set[Path]:
    return {p for p in d.rglob("*") if p.is_file()}


@pytest.mark.parametrize("fp, variant", [
    ("../../../escape", "intelasm"),
    ("f00d", "../../../escape"),
    ("f00d", "a/../../../../escape"),
    ("..", "intelasm"),
    ("<tmp>/abs", "intelasm"),
])
def test_history_add_refuses_names_that_leave_the_store(tmp_path: Path, fp: str, variant: str) -> None:
    store = tmp_path / "a" / "b" / "store"
    fp = fp.replace("<tmp>", str(tmp_path))  # an absolute id, kept in tmp_path should it be written
    doc = tmp_path / "r.json"
    doc.write_text(to_json([run(repeats(1, 3), variant=variant, metadata={"fingerprint": {"id": fp}})]))
    before = files_under(tmp_path)
    p = subprocess.run([str(BSDKM_CI), "history", "add", "--store", str(store), str(doc)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "not a plain name" in p.stderr and "Traceback" not in p.stderr
    assert files_under(tmp_path) == before  # nothing written, inside the store or out of it


def test_a_symlink_inside_the_store_does_not_lead_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = tmp_path / "store"
    store.mkdir()
    (store / "f00d").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreError, match="outside the history store"):
        DirStore(store).add(run(repeats(1, 3), metadata={"fingerprint": {"id": "f00d"}}))
    assert not any(outside.iterdir())


def test_plain_names_are_stored_as_before(tmp_path: Path) -> None:
    path = DirStore(tmp_path).add(run(repeats(1, 3), variant="aesni-avx_2.x+y",
                                      metadata={"fingerprint": {"id": "f00d"}}))
    assert path.parent == tmp_path / "f00d" / "userspace" / "aesni-avx_2.x+y"


def test_database_history_without_sqlalchemy_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # what an install without the extra sees
    with pytest.raises(StoreError, match=r"buildbot-bsdkm\[buildbot\]"):
        SqlStore(f"sqlite:///{tmp_path / 'h.sqlite'}")


def test_the_buildbot_extra_declares_sqlalchemy() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["buildbot"]
    assert any(d.lower().startswith("sqlalchemy") for d in extra)
