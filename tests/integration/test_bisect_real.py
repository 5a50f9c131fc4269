"""``bsdkm-ci bisect`` for real: histories on the real wolfSSL 5.9.2 tree, built and run on userspace.

The histories are made at test time (tests/bisect_history.py): a failure history (a wrong SHA-256
expected value in test.c, a commit that does not compile before it), a perf history (extra work
in Sha256Update, bisected on counted instructions) and a history whose change is within the noise
(bisected on wall-clock rounds: it must end "could not decide"). Configured lean: the portable C
build with what the self-test and the SHA-256 benchmark need; ccache makes each step's build
mostly cache hits.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bisect_history import History, base_repo, lean_config, make_history

from buildbot_bsdkm.bisection.search import build_limit
from buildbot_bsdkm.cli import main
from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """(repository, base commit, config file): the 5.9.2 tree committed once for every history."""
    where = tmp_path_factory.mktemp("bisect")
    path, base = base_repo(where, wolfssl_source())
    return path, base, lean_config(where, path)


def _bisect(config: Path, hist: History, out: Path, *what: str) -> tuple[int, dict]:
    code = main(["bisect", "--config", str(config), "--source-dir", str(hist.repo), "--good", hist.good,
                 "--bad", hist.branch, "--target", "userspace", "--variant", "noasm", "--out", str(out),
                 *what])
    return code, json.loads((out / "bisect.json").read_text())


def test_self_test_failure_is_bisected_past_a_commit_that_does_not_build(
        repo: tuple[Path, str, Path], tmp_path: Path) -> None:
    path, base, config = repo
    hist = make_history(path, base, "failure", 32, failure_at=21, broken_at=16)
    code, result = _bisect(config, hist, tmp_path / "out", "--failure", "SHA-256")
    assert code == 0, result["why"]
    assert result["culprit"]["sha"] == hist.planted["failure"]
    assert result["culprit"]["author"] == "Careless Committer <oops@example.org>"
    assert result["parent"]["sha"] == hist.commits[20]
    assert result["confidence"] == "high"
    assert result["builds"] <= build_limit(32) == math.ceil(math.log2(32)) + 3
    broken = [s for s in result["steps"] if s["commit"]["sha"] == hist.planted["broken"]]
    assert [s["outcome"] for s in broken] == ["skip"]
    assert "does not build" in broken[0]["reason"] and "hash.c" in broken[0]["reason"]
    verify = [s for s in result["steps"] if s["purpose"] == "verify"]
    assert [(s["commit"]["sha"], s["outcome"], s["built"]) for s in verify] == [
        (hist.planted["failure"], "bad", False), (hist.commits[20], "good", False)]
    assert "SHA-256 self-test failed" in result["evidence"]["reason"]
    check = result["evidence"]["check"]
    assert check["name"] == "SHA-256" and check["kind"] == "selftest"
    md = (tmp_path / "out" / "bisect.md").read_text()
    assert "Culprit" in md and hist.planted["failure"] in md and "Verification runs" in md


def test_perf_loss_is_bisected_on_counted_instructions(repo: tuple[Path, str, Path], tmp_path: Path) -> None:
    path, base, config = repo
    hist = make_history(path, base, "perf", 16, perf_at=11)
    code, result = _bisect(config, hist, tmp_path / "out", "--regression", "SHA-256", "--pct", "10",
                           "--metric", "instructions")
    assert code == 0, result["why"]
    assert result["culprit"]["sha"] == hist.planted["perf"]
    assert result["evidence"]["metric"] == "instructions"
    assert 5 <= result["evidence"]["change_pct"] <= 20
    assert result["builds"] <= build_limit(16) + 1  # + the good end, built to be counted against


def test_a_change_within_the_noise_ends_could_not_decide(repo: tuple[Path, str, Path],
                                                         tmp_path: Path) -> None:
    """Two iterations of the extra loop (well under 1 %) measured on wall-clock rounds for a 10 % loss."""
    path, base, config = repo
    hist = make_history(path, base, "noise", 8, perf_at=5, extra=2)
    code, result = _bisect(config, hist, tmp_path / "out", "--regression", "SHA-256", "--pct", "10")
    assert code == 1
    assert result["status"] == "could not decide" and result["culprit"] is None
    # Within the noise the bad end stays undecided, and all 8 remain. A round of noise can also call
    # the end bad; then the search narrows to where its steps stay undecided ("could not be tested"),
    # which never leaves the planted change out.
    remaining = [c["sha"] for c in result["remaining"]]
    assert remaining == hist.commits[-len(remaining):] and hist.planted["perf"] in remaining, result["why"]
    if "could not be tested" not in result["why"]:
        assert "the bad end" in result["why"] and len(remaining) == 8, result["why"]
    assert result["steps"][0]["rounds"] >= 5


KERNEL_CONFIG = """\
source: {{local: {repo}}}
targets:
  linux-kmod-qemu: {{flags: [--enable-cryptonly, --disable-ecc, --disable-dh], cpu: max}}
variants:
  noasm: {{flags: [--disable-asm], targets: [linux-kmod-qemu]}}
benchmark: {{min_runtime_s: 0.01, embedded: true, ntimes: 1, agreetimes: 1}}
timeouts: {{load: 1200}}
retry: {{max_infra_retries: 1, backoff_s: [1]}}
policy: {policy}
"""


def test_a_kernel_oops_on_load_is_bisected_on_the_linux_module_in_qemu(
        repo: tuple[Path, str, Path], tmp_path: Path) -> None:
    """Four commits, the third makes the module's init write through NULL: an oops at load."""
    path, base, config = repo
    kernel = tmp_path / "kernel.yml"
    kernel.write_text(KERNEL_CONFIG.format(repo=path, policy=config.parent / "policy.yml"))
    hist = make_history(path, base, "oops", 4, oops_at=3)
    code = main(["bisect", "--config", str(kernel), "--source-dir", str(path), "--good", hist.good,
                 "--bad", hist.branch, "--target", "linux-kmod-qemu", "--variant", "noasm",
                 "--out", str(tmp_path / "out"), "--failure", "*: NULL pointer dereference"])
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert code == 0, result["why"]
    assert result["culprit"]["sha"] == hist.planted["oops"]
    assert "wolfssl_init" in result["evidence"]["reason"]
    assert result["builds"] <= build_limit(4)
