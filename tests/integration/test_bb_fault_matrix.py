"""50 simulated builds through a real Buildbot master and two real workers, 30 % of fetches failing
with a real network error: every build must reach its verdict with no manual retry.

The builds are simulated so that 50 of them fit on a shared 2-core machine: the workers run a stand-in
for ``bsdkm-ci stage`` that does no compiling. Everything it hands back is real: the network error is
curl's text, the failing self-test is wolfCrypt's real output (``testwolfcrypt_FAIL_ulimit_v8000``),
``results.json`` is the real parser's reading of real fixtures and the verdict is the real policy's.
What is under test is everything on the Buildbot side: steps, classification, ``BoundedRetryBuild``,
backoff holds, worker choice, re-queueing, and reading it all back over REST.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from buildbot_bsdkm.buildbot.control import (
    VENV_BIN,
    Layout,
    Rest,
    create,
    kill_tree,
    start_master,
    stop_master,
)
from buildbot_bsdkm.buildbot.control import worker_process as start_worker_process
from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import evaluate, load_policy

pytestmark = pytest.mark.slow

N_BUILDS = 50
N_BROKEN = 10  # userspace/intelasm builds: their self-test fails for real
FAILURE_RATE = 0.3
WORKERS = ("sim-a", "sim-b")
SUCCESS, FAILURE, EXCEPTION, RETRY = 0, 2, 4, 5
CURL_ERROR = "curl: (6) Could not resolve host: deb.debian.org"

STAND_IN = '''#!{python}
"""bsdkm-ci stage, simulated: no compiling; real texts and documents from {data}.

Like the real stage it keeps DIR/userspace/<variant>/state.json: the stages that ran and the
failure, classified by the real classify on the real failing self-test output."""
import fcntl, json, shutil, sys
from pathlib import Path

data = Path("{data}")
stage, args = sys.argv[2], sys.argv[3:]
opt = dict(zip(args[::2], args[1::2]))
variant = opt["--variant"]
run = Path(opt["--out"]) / "userspace" / variant
run.mkdir(parents=True, exist_ok=True)
state_file = run / "state.json"
state = json.loads(state_file.read_text()) if state_file.is_file() else {{}}
state.setdefault("stages", {{}})[stage] = 0.0


def save():
    state_file.write_text(json.dumps(state))


if stage == "fetch":
    with open(data / "fetch-outcomes", "r+") as f:  # the injected failures, consumed in order
        fcntl.flock(f, fcntl.LOCK_EX)
        lines = f.read().splitlines()
        f.seek(0); f.truncate(); f.write("\\n".join(lines[1:]))
    if lines and lines[0] == "fail":
        print("{curl}", file=sys.stderr)
        sys.exit(2)
elif stage == "load" and variant == "intelasm":
    from buildbot_bsdkm.retry.classify_failure import classify
    from buildbot_bsdkm.parsers import parse_text

    text = (data / "selftest-fail.txt").read_text()
    sys.stdout.write(text)
    failure = classify("load", exit_code=1, output=text, log_results=[parse_text(text, "test.log")])
    state["failure"] = failure.to_dict()
    save()
    sys.exit(1)
elif stage == "collect":
    shutil.copy(data / f"results-{{variant}}.json", run / "results.json")
elif stage == "gate":
    verdict = json.loads((data / f"state-{{variant}}.json").read_text())["verdict"]
    state["verdict"] = verdict
    save()
    print(verdict["summary"])
    sys.exit(0 if verdict["passed"] else 1)
save()
print(f"{{stage}} ok: userspace/{{variant}} (simulated)")
'''


def write_documents(data: Path) -> None:
    """Real results and verdicts for a good (noasm) and a broken (intelasm) run."""
    policy = load_policy(ROOT / "policies/default.yml")
    logs = {
        "noasm": [parse_file(FIXTURES / "userspace/noasm/testwolfcrypt.txt"),
                  parse_file(FIXTURES / "userspace/noasm/bench_default.txt")],
        "intelasm": [parse_file(FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt"),
                     parse_file(FIXTURES / "userspace/accel/bench_default.txt")],
    }
    for variant, variant_logs in logs.items():
        run = RunResult(variant=variant, target="userspace", logs=variant_logs)
        (data / f"results-{variant}.json").write_text(to_json([run]))
        verdict = evaluate([run], policy)
        (data / f"state-{variant}.json").write_text(json.dumps({"verdict": verdict.to_dict()}))
    (data / "selftest-fail.txt").write_text(
        (FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt").read_text())


def fetch_outcomes(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return ["fail" if rng.random() < FAILURE_RATE else "ok" for _ in range(n)]


class Matrix:
    def __init__(self, base: Path) -> None:
        data = base / "data"
        data.mkdir()
        write_documents(data)
        self.outcomes = fetch_outcomes(400)  # more than the builds can consume
        (data / "fetch-outcomes").write_text("\n".join(self.outcomes))
        stand_in = base / "bsdkm-ci-sim"
        stand_in.write_text(STAND_IN.format(python=VENV_BIN / "python", data=data, curl=CURL_ERROR))
        stand_in.chmod(0o755)
        config = base / "bsdkm.yml"
        text = (ROOT / "bsdkm.yml").read_text().replace("backoff_s: [30, 120]", "backoff_s: [1, 2]")
        policy = f"policy: {ROOT / 'policies/default.yml'}"
        config.write_text(text.replace("policy: policies/default.yml", policy))
        self.data = data
        self.layout = Layout(base / "bb")
        create(self.layout, config_path=config, workers=WORKERS, bsdkm_ci=str(stand_in))
        start_master(self.layout)
        self.rest = Rest(self.layout.www_url())
        self.procs = [start_worker_process(self.layout, w) for w in WORKERS]
        self.rest.wait_workers(list(WORKERS), timeout=120)

    def consumed(self) -> list[str]:
        left = (self.data / "fetch-outcomes").read_text().splitlines()
        return self.outcomes[: len(self.outcomes) - len(left)]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                kill_tree(p.pid)
                p.wait(timeout=30)
        stop_master(self.layout)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    m = Matrix(tmp_path_factory.mktemp("bbmatrix"))
    try:
        yield m
    finally:
        m.stop()


def test_fifty_builds_with_thirty_percent_network_failures_need_no_manual_retry(matrix: Matrix):
    started = time.monotonic()
    wanted = {}
    for i in range(N_BUILDS):
        builder = "userspace/intelasm" if i % (N_BUILDS // N_BROKEN) == 0 else "userspace/noasm"
        wanted[matrix.rest.force([builder], f"fault matrix {i}")] = builder
    for bsid in wanted:
        matrix.rest.wait_buildset(bsid, timeout=1800)
    took = time.monotonic() - started

    verdicts: Counter[str] = Counter()
    attempts = infra_retries = real_retries = gave_up = wrong = 0
    for bsid, builder in wanted.items():
        builds = matrix.rest.builds_of_buildset(bsid)
        last = builds[-1]
        props = matrix.rest.properties(last["buildid"])
        history = props["bsdkm_attempts"]
        attempts += len(builds)
        assert len(history) == len(builds)
        infra_retries += sum(1 for a in history[:-1] if a["category"] == "infrastructure")
        real_retries += sum(1 for a in history[:-1] if a["category"] == "real")
        # Every attempt but the last was re-queued by the policy (RETRY); none was left hanging.
        assert [b["results"] for b in builds[:-1]] == [RETRY] * (len(builds) - 1)
        for a in history[:-1]:
            assert (a["stage"], a["reason"]) == ("fetch", "network")
        expected = FAILURE if builder == "userspace/intelasm" else SUCCESS
        if last["results"] == expected:
            verdicts[f"{builder} {'passed' if expected == SUCCESS else 'failed'}"] += 1
            if expected == FAILURE:
                assert props["bsdkm_failure"]["reason"] == "selftest"
                assert props["bsdkm_selftest"] == "self-test: 70/71 passed (PWDBASED failed -125)"
        elif last["results"] == EXCEPTION and all(a["reason"] == "network" for a in history):
            gave_up += 1  # three network failures in a row: reported as infrastructure, never pass/fail
        else:
            wrong += 1
    injected = matrix.consumed().count("fail")
    print(f"\n{N_BUILDS} builds in {took:.0f} s: {dict(verdicts)}, gave up (infrastructure): {gave_up}, "
          f"wrong: {wrong}, attempts: {attempts}, injected network failures: {injected}, "
          f"infrastructure retries: {infra_retries}, retries after a real failure: {real_retries}")
    assert wrong == 0
    assert real_retries == 0  # a self-test failure is never retried
    # Each injected failure was retried, or was the last straw of a build that gave up.
    assert injected == infra_retries + gave_up
    assert injected >= 5  # the injection really happened
    assert sum(verdicts.values()) + gave_up == N_BUILDS
