"""The example configuration (``action/examples/config/bsdkm.yml``, copied to ``.github/bsdkm.yml``) runs
every cell of every example workflow: each matrix cell's ``variants`` and ``targets`` (GitHub's
expansion, include and exclude) select at least one run through the core's selection, as
``bsdkm-ci run`` and the cache-key step make it; the release workflow's FreeBSD releases are the
config's; the bisect workflow's defaults select a run. ``action.yml`` names every target the core has.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from buildbot_bsdkm.config.bsdkm_yml import Config, ConfigError, default_config_path, load_config
from buildbot_bsdkm.pipeline.jobs.release import RUN, plan_matrix
from buildbot_bsdkm.targets import names as target_names

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "action" / "examples"
CONFIG = EXAMPLES / "config" / "bsdkm.yml"
WORKFLOWS = sorted(EXAMPLES.glob("bsdkm-*.yml"))
ACTION_USES = "wolfSSL/bsdkm-ci/action@"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def workflow(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # "on" stays a key, values stay text


def matrix_cells(job: dict[str, Any]) -> list[dict[str, str]]:
    """GitHub's expansion of ``strategy.matrix``: the product of its lists less ``exclude``; then each
    ``include`` entry is added to every product cell whose original values it does not change, or is
    a cell of its own when it fits none. A job without a matrix is one cell."""
    matrix = job.get("strategy", {}).get("matrix")
    if not matrix:
        return [{}]
    keys = [k for k in matrix if k not in ("include", "exclude")]
    product = itertools.product(*(matrix[k] for k in keys)) if keys else ()
    cells = [dict(zip(keys, values, strict=True)) for values in product]
    cells = [c for c in cells if not any(all(c.get(k) == v for k, v in ex.items())
                                         for ex in matrix.get("exclude", []))]
    originals: list[dict[str, str] | None] = [dict(c) for c in cells]  # None: a cell an include made
    for entry in matrix.get("include", []):
        fits = [i for i, orig in enumerate(originals)
                if orig is not None and all(orig[k] == v for k, v in entry.items() if k in orig)]
        for i in fits:
            cells[i].update(entry)
        if not fits:
            cells.append(dict(entry))
            originals.append(None)
    return cells


def render(text: str, cell: dict[str, str]) -> str:
    """``${{ matrix.x }}`` from the cell; any other expression is empty (a retest that names no variant)."""
    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        return cell.get(name.removeprefix("matrix."), "") if name.startswith("matrix.") else ""
    return EXPRESSION.sub(value, text)


def names(text: str) -> list[str] | None:
    """As ``run-bsdkm-ci.sh`` splits an input: commas and blanks; nothing means everything."""
    return text.replace(",", " ").split() or None


def action_runs() -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(where, cell, the action step's inputs) for every matrix cell of every step that runs bsdkm-ci."""
    found = []
    for path in WORKFLOWS:
        for job_name, job in workflow(path)["jobs"].items():
            for step in job.get("steps", []):
                inputs = step.get("with", {})
                if str(step.get("uses", "")).startswith(ACTION_USES) and not inputs.get("results"):
                    found += [(f"{path.name}:{job_name}", cell, inputs) for cell in matrix_cells(job)]
    return found


@pytest.fixture(scope="module")
def example() -> Config:
    return load_config(CONFIG)


def test_the_matrix_expansion_is_githubs() -> None:
    # The example of GitHub's documentation ("Expanding or adding matrix configurations"), and exclude.
    job = {"strategy": {"matrix": {
        "fruit": ["apple", "pear"], "animal": ["cat", "dog"],
        "include": [{"color": "green"}, {"color": "pink", "animal": "cat"},
                    {"fruit": "apple", "shape": "circle"}, {"fruit": "banana"},
                    {"fruit": "banana", "animal": "cat"}]}}}
    assert matrix_cells(job) == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"}]
    job["strategy"]["matrix"]["exclude"] = [{"fruit": "pear", "animal": "dog"}]
    assert {"fruit": "pear", "animal": "dog", "color": "green"} not in matrix_cells(job)
    assert matrix_cells({"strategy": {"matrix": {"include": [{"t": "u"}, {"t": "l"}]}}}) == [{"t": "u"},
                                                                                              {"t": "l"}]


def test_every_cell_of_every_example_selects_a_run(example: Config) -> None:
    runs = action_runs()
    assert {where.split(":")[0] for where, _, _ in runs} == {"bsdkm-pr.yml", "bsdkm-nightly.yml",
                                                             "bsdkm-retest.yml"}
    assert len(runs) == 9 + 12 + 6 + 3  # PR 3x3, nightly FreeBSD 3x4 and Linux 3x2, retest 3
    for where, cell, inputs in runs:
        assert inputs["config"].endswith(".github/bsdkm.yml"), where  # the file this example is copied to
        variants = names(render(inputs.get("variants", ""), cell))
        targets = names(render(inputs.get("targets", ""), cell))
        assert example.selected_pairs(variants, targets), (where, cell)


def test_the_pr_checks_freebsd_cells_ran_nothing_with_the_main_jobs_config(example: Config) -> None:
    shipped = load_config(default_config_path())
    with pytest.raises(ConfigError, match="the selection runs nothing"):
        shipped.selected_pairs(["intelasm"], ["freebsd-kmod"])
    assert example.selected_pairs(["intelasm"], ["freebsd-kmod"]) == [("freebsd-kmod", "intelasm")]


def test_a_retest_naming_no_variant_runs_what_the_pr_check_ran(example: Config) -> None:
    pr = workflow(EXAMPLES / "bsdkm-pr.yml")["jobs"]["test"]["strategy"]["matrix"]
    for target in pr["target"]:
        assert {v for _, v in example.selected_pairs(None, [target])} == set(pr["variant"]), target


def test_the_release_workflow_runs_each_of_its_freebsd_releases(example: Config) -> None:
    release = workflow(EXAMPLES / "bsdkm-release.yml")["jobs"]
    assert "--target freebsd-kmod" in str(release["freebsd"]["steps"])
    for cell in matrix_cells(release["freebsd"]):
        host = cell["freebsd-release"]
        assert host in example.release.freebsd_releases
        ran = [i for i in plan_matrix(example, None, ["freebsd-kmod"], host) if i.status == RUN]
        assert ran and all(i.os_release == host for i in ran), host
    linux = [i for i in plan_matrix(example, None, None, None) if i.status == RUN]
    assert {i.target for i in linux} == {"userspace", "linux-kmod-qemu"}
    tags = workflow(EXAMPLES / "bsdkm-release.yml")["on"]["push"]["tags"]
    assert tags == [example.release.tag_pattern]


def test_the_bisect_workflows_defaults_select_a_run(example: Config) -> None:
    inputs = workflow(EXAMPLES / "bsdkm-bisect.yml")["on"]["workflow_dispatch"]["inputs"]
    assert example.selected_pairs([inputs["variant"]["default"]], [inputs["target"]["default"]])


def test_action_yml_names_every_target() -> None:
    action = yaml.safe_load((ROOT / "action" / "action.yml").read_text())
    described = action["inputs"]["targets"]["description"]
    assert set(re.findall(r"[a-z]+(?:-[a-z]+)+|userspace", described)) >= set(target_names()), described


def test_the_action_docs_start_from_the_example_config() -> None:
    text = (ROOT / "docs" / "action.md").read_text()
    assert "action/examples/config/bsdkm.yml" in text
