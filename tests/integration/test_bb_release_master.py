"""The release force form through a real Buildbot master and worker: wolfSSL 5.9.2 against 5.7.2 (the
userspace pair of ``test_release_real.py``, whose release builds it reuses from the cache), with the
report read back through the REST API as the build's HTML log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from buildbot_bsdkm.buildbot.control import (
    Layout,
    Rest,
    create,
    kill_tree,
    start_master,
    stop_master,
    worker_process,
)

pytestmark = pytest.mark.slow

CONFIG = """\
targets:
  userspace:
    flags: [--enable-cryptonly, --enable-crypttests, --enable-all-crypto]
variants:
  intelasm:
    flags: [--enable-aesni, --enable-intelasm, --enable-sp-asm, --disable-ecc]
    targets: [userspace]
  noasm:
    flags: [--disable-asm, --disable-ecc]
    targets: [userspace]
benchmark:
  min_runtime_s: 0.01
  embedded: true
  ntimes: 1
  agreetimes: 1
  userspace_args: [-aes-gcm, -aes-cbc, -sha256]
release: {repeats: 2, previous: "debian:trixie/5.7.2"}
policy: {policy}
workers: {}
"""
# The comparison is made and reported; no measured drop fails it (a 10 ms window under load can lose 99 %).
POLICY = "version: 1\nregressions:\n  - {pattern: '*', max_pct: 100}\n"
BUILD_TIMEOUT = 1800.0


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Layout, Rest]]:
    base = tmp_path_factory.mktemp("bbrelease")
    (base / "policy.yml").write_text(POLICY)
    config = base / "bsdkm.yml"
    config.write_text(CONFIG.replace("{policy}", str(base / "policy.yml")))
    layout = Layout(base / "bb")
    create(layout, config_path=config, workers=("local",))
    start_master(layout)
    worker = worker_process(layout, "local")
    rest = Rest(layout.www_url())
    try:
        rest.wait_workers(["local"], timeout=120)
        yield layout, rest
    finally:
        kill_tree(worker.pid)
        worker.wait(timeout=30)
        stop_master(layout)


def force_release(rest: Rest, candidate: str, previous: str) -> int:
    body = {"jsonrpc": "2.0", "method": "force", "id": 1,
            "params": {"builderNames": ["release/linux"], "reason": "release test", "candidate": candidate,
                       "previous": previous}}
    r = requests.post(f"{rest.base}/forceschedulers/release-force", json=body, timeout=30)
    doc = r.json()
    assert r.status_code == 200 and "error" not in doc, doc
    return int(doc["result"][0])


def test_forced_release_build_attaches_the_report_as_html(master: tuple[Layout, Rest]) -> None:
    _, rest = master
    bsid = force_release(rest, "debian:sid/5.9.2", "debian:trixie/5.7.2")
    rest.wait_buildset(bsid, timeout=BUILD_TIMEOUT)
    (build,) = rest.builds_of_buildset(bsid)
    steps = {s["name"]: s for s in rest.get(f"builds/{build['buildid']}/steps")}
    assert steps["release"]["results"] == 0, steps["release"]["state_string"]
    assert steps["release"]["state_string"].startswith("release: PASS: ")
    logs = {lg["name"]: lg for lg in rest.get(f"builds/{build['buildid']}/steps/release/logs")}
    assert logs["release report"]["type"] == "h"
    html = "".join(c["content"] for c in rest.get(f"logs/{logs['release report']['logid']}/contents"))
    assert html.count("<svg") == 2 and "debian:trixie/wolfssl=5.7.2 (wolfSSL 5.7.2)" in html
    assert rest.properties(build["buildid"])["bsdkm_release_verdict"] == "passed"
    # The candidate's results, the new baseline of the 5.9 line, are kept with the build.
    base = "".join(c["content"] for c in rest.get(f"logs/{logs['baseline-5.9.json']['logid']}/contents"))
    assert '"wolfssl_version": "5.9.2"' in base


def test_force_form_refuses_an_unknown_source_by_name(master: tuple[Layout, Rest]) -> None:
    _, rest = master
    bsid = force_release(rest, "debian:sid/5.9.2", "5.7.2")
    rest.wait_buildset(bsid, timeout=300)
    (build,) = rest.builds_of_buildset(bsid)
    (step,) = [s for s in rest.get(f"builds/{build['buildid']}/steps") if s["name"] == "release"]
    assert step["results"] == 2
    assert "--previous: unknown source '5.7.2'" in step["state_string"]
