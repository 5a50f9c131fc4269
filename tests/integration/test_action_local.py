"""The composite action's own steps, run here the way the Actions runner runs them.

``action/action.yml`` is read, each step's ``if:`` and ``${{ }}`` expressions are evaluated
(a small evaluator for the GitHub expression syntax the action uses: contexts, ``==``/``!=``,
``&&``/``||``/``!``, ``format()``, ``always()``/``success()``/``failure()``), and every ``run:``
step executes with ``bash --noprofile --norc -eo pipefail`` as on a runner, with
``GITHUB_OUTPUT``/``GITHUB_STEP_SUMMARY``/``GITHUB_ACTION_PATH``/``GITHUB_WORKSPACE`` pointed at
temp files. Steps that ``uses:`` another action (setup-python, artifacts, the FreeBSD VM) need
GitHub and are recorded, not run.

The run is real: wolfSSL 5.9.2 (Debian's upstream tarball, unpacked as the "checked-out
workspace") is built for the ``userspace`` target; one variant runs normally, the other under
``ulimit -v 8000`` (the config's ``run_prefix``), which makes wolfCrypt's self-test fail for
real, as in fixtures/userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import junitparser
import pytest
import yaml

from buildbot_bsdkm.commands.action.workflow import read_outputs
from buildbot_bsdkm.model import from_json

ROOT = Path(__file__).resolve().parents[2]
ACTION_DIR = ROOT / "action"
VENV_BIN = Path(sys.executable).parent

# --------------------------------------------------------------------------- expressions

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),])|"
                    r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*))")


def tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read expression {text!r} at {pos}")
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


class Expr:
    """GitHub Actions expressions: value semantics of && and ||, case-insensitive string ==."""

    def __init__(self, text: str, lookup: Callable[[str], Any],
                 functions: dict[str, Callable[..., Any]]) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.lookup = lookup
        self.functions = functions

    def value(self) -> Any:
        v = self._or()
        if self.i != len(self.tokens):
            raise ValueError(f"trailing tokens {self.tokens[self.i:]}")
        return v

    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._cmp()
        while self._peek() == "&&":
            self._take()
            right = self._cmp()
            left = right if truthy(left) else left
        return left

    def _cmp(self) -> Any:
        left = self._unary()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            same = as_text(left).lower() == as_text(right).lower()
            left = same if op == "==" else not same
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if text == "(":
            v = self._or()
            assert self._take()[1] == ")"
            return v
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        if self._peek() == "(":
            self._take()
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take()
            return self.functions[text](*args)
        return self.lookup(text)


def as_text(v: Any) -> str:
    return "" if v is None else str(v)


def truthy(v: Any) -> bool:
    return v not in (None, "", False, 0, 0.0)


def gh_format(template: str, *args: Any) -> str:
    return re.sub(r"\{(\d+)\}", lambda m: str(args[int(m.group(1))]), template)


# --------------------------------------------------------------------------- the runner


@dataclass
class StepResult:
    id: str
    name: str
    outcome: str  # success | failure | skipped
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    uses: str | None = None


class LocalRunner:
    """Runs a composite action's steps as the Actions runner would, with local files for GitHub's."""

    def __init__(self, action_dir: Path, inputs: dict[str, str], workspace: Path, temp: Path,
                 bin_dir: Path = VENV_BIN) -> None:
        self.meta = yaml.safe_load((action_dir / "action.yml").read_text())
        self.bin_dir = bin_dir  # first on PATH: where python3, pip and bsdkm-ci come from
        self.action_dir = action_dir
        self.workspace = workspace
        self.temp = temp
        self.summary = temp / "step_summary.md"
        self.summary.touch()
        self.github = {"workspace": str(workspace), "token": "", "event_name": "pull_request",
                       "base_ref": "master", "action_path": str(action_dir), "repository": "wolfSSL/wolfssl",
                       "event": {"repository": {"default_branch": "master"}}}
        self.runner = {"os": "Linux", "arch": "X64", "temp": str(temp)}
        self.steps: dict[str, StepResult] = {}
        self.results: list[StepResult] = []
        self.failed = False
        self.inputs: dict[str, str] = {}
        self.inputs = {name: self._default(spec) for name, spec in self.meta["inputs"].items()}
        unknown = set(inputs) - set(self.inputs)
        assert not unknown, f"not inputs of the action: {unknown}"
        self.inputs.update(inputs)

    def _default(self, spec: dict[str, Any]) -> str:
        return self.substitute(str(spec.get("default", "")))

    def lookup(self, path: str) -> Any:
        head, *rest = path.split(".")
        node: Any = {"inputs": self.inputs, "github": self.github, "runner": self.runner,
                     "steps": {k: {"outcome": v.outcome, "conclusion": v.outcome, "outputs": v.outputs}
                               for k, v in self.steps.items()}}[head]
        for part in rest:
            node = node.get(part) if isinstance(node, dict) else None
        return node

    def evaluate(self, text: str) -> Any:
        functions = {"always": lambda: True, "success": lambda: not self.failed,
                     "failure": lambda: self.failed, "format": gh_format,
                     "contains": lambda a, b: str(b).lower() in str(a).lower()}
        return Expr(text, self.lookup, functions).value()

    def substitute(self, text: str) -> str:
        def one(m: re.Match[str]) -> str:
            v = self.evaluate(m.group(1))
            if isinstance(v, bool):
                return "true" if v else "false"
            return "" if v is None else str(v)

        return re.sub(r"\$\{\{(.*?)\}\}", one, text)

    def should_run(self, step: dict[str, Any]) -> bool:
        cond = str(step.get("if", "success()"))
        cond = cond.removeprefix("${{").removesuffix("}}")
        if not re.search(r"\b(always|success|failure|cancelled)\(", cond):
            cond = f"success() && ({cond})"
        return truthy(self.evaluate(cond))

    def run(self) -> dict[str, str]:
        for n, step in enumerate(self.meta["runs"]["steps"]):
            sid = step.get("id", f"__{n}")
            name = step.get("name", sid)
            if not self.should_run(step):
                result = StepResult(sid, name, "skipped", uses=step.get("uses"))
            elif "uses" in step:
                result = StepResult(sid, name, "not-run-here", uses=step["uses"])
            else:
                result = self.run_script(sid, name, step)
                if result.outcome == "failure" and not step.get("continue-on-error"):
                    self.failed = True
            self.steps[sid] = result
            self.results.append(result)
        return {k: self.substitute(str(v["value"])) for k, v in self.meta["outputs"].items()}

    def run_script(self, sid: str, name: str, step: dict[str, Any]) -> StepResult:
        assert step["shell"] == "bash"
        output = self.temp / f"output_{sid}"
        output.write_text("")
        script = self.temp / f"step_{sid}.sh"
        script.write_text(self.substitute(step["run"]))
        env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
        env.update({k: self.substitute(str(v)) for k, v in (step.get("env") or {}).items()})
        env.update(
            PATH=f"{self.bin_dir}:{env.get('PATH', '')}",
            GITHUB_ACTIONS="true",
            GITHUB_ACTION_PATH=str(self.action_dir),
            GITHUB_WORKSPACE=str(self.workspace),
            GITHUB_OUTPUT=str(output),
            GITHUB_STEP_SUMMARY=str(self.summary),
            GITHUB_EVENT_NAME="pull_request",
            RUNNER_TEMP=str(self.temp),
        )
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=self.workspace, env=env, capture_output=True, text=True, timeout=1800)
        return StepResult(sid, name, "success" if proc.returncode == 0 else "failure",
                          read_outputs(output.read_text()), proc.stdout, proc.stderr)

    def step(self, name_or_id: str) -> StepResult:
        return next(r for r in self.results if name_or_id in (r.id, r.name))


# --------------------------------------------------------------------------- expression checks


def test_expressions_follow_github_semantics(tmp_path: Path) -> None:
    r = LocalRunner(ACTION_DIR, {"runner": "freebsd-vm"}, tmp_path, tmp_path)
    assert r.evaluate("inputs.runner == 'FreeBSD-VM'") is True  # string comparison ignores case
    assert r.evaluate("inputs.results == '' && inputs.runner") == "freebsd-vm"
    assert r.evaluate("steps.nope.outcome == 'failure' && 'x' || 'fallback'") == "fallback"
    assert r.evaluate("format('{0}/bsdkm-baseline', runner.temp)") == f"{tmp_path}/bsdkm-baseline"
    assert r.inputs["source"] == str(tmp_path)  # the default ${{ github.workspace }}
    assert r.should_run({"if": "inputs.runner == 'local'"}) is False
    r.failed = True
    assert r.should_run({"if": "inputs.runner == 'freebsd-vm'"}) is False  # implicit success()
    assert r.should_run({"if": "always() && inputs.runner == 'freebsd-vm'"}) is True


# --------------------------------------------------------------------------- the real run

CONFIG = """\
source: {debian: {suite: sid, package: wolfssl, version: "5.9.2"}}   # replaced by the workspace
targets:
  userspace:
    flags: [--enable-cryptonly, --enable-crypttests, --enable-all-crypto]
variants:
  intelasm:
    flags: [--enable-aesni, --enable-intelasm, --enable-sp-asm, --disable-ecc]
    targets: [userspace]
benchmark:
  min_runtime_s: 0.01
  embedded: true
  ntimes: 1
  agreetimes: 1
  userspace_args: [-aes-gcm, -aes-cbc, -sha256]
jobs: 2
parallel: 1
cache_dir: cache
"""

# A floor no CPU reaches: the gate must fail on the real measured number, whatever the load.
POLICY = """\
version: 1
floors:
  - {pattern: "AES-128-GCM-enc", min: 1000, unit: "GiB/s"}
"""


def wolfssl_tarball() -> Path:
    from buildbot_bsdkm.pipeline.runtime.source import cache_root

    tarball = cache_root() / "downloads" / "wolfssl_5.9.2.orig.tar.gz"
    if not tarball.is_file():
        pytest.fail(f"{tarball} missing: run `bsdkm-ci main` once to fetch wolfSSL from Debian's archive")
    return tarball


@pytest.fixture(scope="module")
def action_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalRunner, dict[str, str]]]:
    root = tmp_path_factory.mktemp("action")
    with tarfile.open(wolfssl_tarball()) as tar:
        tar.extractall(root / "checkout", filter="data")
    workspace = root / "checkout" / "wolfssl-5.9.2-stable"  # as actions/checkout would leave it
    (workspace / ".github").mkdir(exist_ok=True)  # wolfSSL has its own workflows there
    (workspace / ".github" / "bsdkm.yml").write_text(CONFIG)
    (workspace / ".github" / "bsdkm-policy.yml").write_text(POLICY)
    (root / "temp").mkdir()
    inputs = {"config": ".github/bsdkm.yml", "policy": ".github/bsdkm-policy.yml", "variants": "intelasm",
              "targets": "userspace", "install": "false", "apt-packages": "", "out-dir": "bsdkm-ci-out"}
    runner = LocalRunner(ACTION_DIR, inputs, workspace, root / "temp")
    outputs = runner.run()
    yield runner, outputs


@pytest.mark.slow
def test_steps_that_ran_and_those_left_to_github(action_run: tuple[LocalRunner, dict[str, str]]) -> None:
    runner, _ = action_run
    ran = [(r.name, r.outcome) for r in runner.results if r.outcome != "skipped"]
    assert ran == [
        ("Build cache key", "success"),
        ("Cache the wolfSSL build", "not-run-here"),
        ("Run bsdkm-ci", "success"),
        ("Outputs, job summary and annotations", "success"),
        ("Upload logs, JUnit and reports", "not-run-here"),
        ("Verdict", "failure"),  # the floor failed: the job fails, after the reports are out
    ], [(r.name, r.outcome, r.stderr[-2000:]) for r in runner.results]
    assert runner.step("Upload logs, JUnit and reports").uses.startswith("actions/upload-artifact@")
    assert runner.step("cache-key").outputs["key"].startswith(runner.step("cache-key").outputs["restore"])
    assert runner.step("Update the PR comment").outcome == "skipped"  # comment-mode: off by default
    assert runner.step("Commit statuses").outcome == "skipped"  # statuses: 'false' by default
    assert runner.step("Run bsdkm-ci in a FreeBSD VM").outcome == "skipped"


@pytest.mark.slow
def test_outputs_match_the_real_results(action_run: tuple[LocalRunner, dict[str, str]]) -> None:
    runner, outputs = action_run
    out_dir = runner.workspace / "bsdkm-ci-out"
    # The run judged itself with the config's (default) policy and passed...
    assert (out_dir / "run.exit-code").read_text().strip() == "0"
    (run,) = from_json((out_dir / "summary.json").read_text())
    assert (run.target, run.variant, run.failure) == ("userspace", "intelasm", None)
    assert run.metadata["source"] == f"local:{runner.workspace}"  # built the checked-out tree
    assert len(run.tests) > 50 and all(t.passed for t in run.tests)
    assert {"AES-128-GCM-enc", "AES-128-CBC-enc", "SHA-256"} <= {b.name for b in run.benchmarks}
    # ...and the action's policy input re-judged it: only the impossible floor fails.
    assert (outputs["verdict"], outputs["regressions"], outputs["failed-tests"]) == ("fail", "0", "0")
    assert outputs["report-path"] == "bsdkm-ci-out/report.md"
    junit = junitparser.JUnitXml.fromfile(str(runner.workspace / outputs["junit-path"]))
    assert (junit.failures, junit.errors) == (1, 0)


@pytest.mark.slow
def test_annotations_and_summary(action_run: tuple[LocalRunner, dict[str, str]]) -> None:
    runner, _ = action_run
    (run,) = from_json((runner.workspace / "bsdkm-ci-out" / "summary.json").read_text())
    gcm = next(b for b in run.benchmarks if b.name == "AES-128-GCM-enc")
    gib = gcm.per_second / 1024**3
    errors = [a for a in runner.step("result").stdout.splitlines() if a.startswith("::error")]
    assert len(errors) == 1
    title, message = errors[0].removeprefix("::error title=").split("::", 1)
    # The annotation points at the benchmark's line in its log.
    m = re.fullmatch(r"Below floor%3A AES-128-GCM-enc \(([\d.]+) GiB/s < floor 1000 GiB/s\) "
                     r"\[userspace/intelasm\],file=\S+,line=\d+", title)
    assert m, title
    assert float(m.group(1)) == pytest.approx(gib, rel=0.01, abs=0.01)
    assert message.startswith("userspace/intelasm: AES-128-GCM-enc ")

    summary = runner.summary.read_text()
    assert summary == (runner.workspace / "bsdkm-ci-out" / "report.md").read_text()
    assert "❌" in summary and "| userspace/intelasm | floor | AES-128-GCM-enc |" in summary
    assert runner.step("Verdict").stdout.startswith("bsdkm-ci: FAIL: 1 of ")


# --------------------------------------------------------------------------- install: "true"
# What a real workflow does: the action installs bsdkm-ci from its own checkout
# (`pip install "$GITHUB_ACTION_PATH/..[github]"`), here into a fresh venv outside this checkout, and
# judges the run with the config's default policy, which must come from the installed package.


@pytest.fixture(scope="module")
def installed_run(action_run: tuple[LocalRunner, dict[str, str]], source_copy: Path, fresh_venv: Path
                  ) -> tuple[LocalRunner, dict[str, str]]:
    first, _ = action_run
    inputs = {"config": ".github/bsdkm.yml", "variants": "intelasm", "targets": "userspace",
              "install": "true", "apt-packages": "", "out-dir": "bsdkm-ci-out-installed"}
    temp = first.temp.parent / "temp-installed"
    temp.mkdir()
    # the same checked-out workspace (and build cache) as the first run; another action checkout and venv
    runner = LocalRunner(source_copy / "action", inputs, first.workspace, temp, bin_dir=fresh_venv / "bin")
    return runner, runner.run()


@pytest.mark.slow
def test_install_true_installs_from_the_action_and_uses_the_packaged_policy(
        installed_run: tuple[LocalRunner, dict[str, str]], fresh_venv: Path) -> None:
    runner, outputs = installed_run
    ran = [(r.name, r.outcome) for r in runner.results if r.outcome != "skipped"]
    assert ran == [
        ("Set up Python", "not-run-here"),
        ("Cache keys of this action", "success"),
        ("Cache pip downloads", "not-run-here"),
        ("Install bsdkm-ci", "success"),
        ("Build cache key", "success"),
        ("Cache the wolfSSL build", "not-run-here"),
        ("Run bsdkm-ci", "success"),
        ("Outputs, job summary and annotations", "success"),
        ("Upload logs, JUnit and reports", "not-run-here"),
        ("Verdict", "success"),
    ], [(r.name, r.outcome, r.stderr[-2000:]) for r in runner.results]
    assert "::group::Install bsdkm-ci" in runner.step("Install bsdkm-ci").stdout
    out_dir = runner.workspace / "bsdkm-ci-out-installed"
    assert (out_dir / "run.exit-code").read_text().strip() == "0"
    assert outputs["verdict"] == "pass"
    summary = json.loads((out_dir / "summary.json").read_text())
    policy = str(summary.get("verdict", {}).get("policy", ""))
    assert policy == "policies/default.yml (packaged)", policy  # the installed package's own, by name
    junit = junitparser.JUnitXml.fromfile(str(runner.workspace / outputs["junit-path"]))
    assert (junit.failures, junit.errors) == (0, 0)
