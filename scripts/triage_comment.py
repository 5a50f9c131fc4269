"""The docs' triage screenshot: a PR comment with every triage section, from real console logs.

    .venv/bin/python scripts/triage_comment.py ../shared /tmp/comment.md /tmp/comment.html
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=$(mktemp -d) \
        --screenshot=docs/_static/triage-comment.png --window-size=1000,1340 file:///tmp/comment.html

The AES-NI panic is the real 5.9.2 debug-kernel console (known, by the default config's entry), the
FP-ECC panic the real one (pre-existing on the recorded base outcomes); the AES-GCM self-test failure
(new), the ECC flake (flaky) and the fixed ECC failure are added to real passing logs.
The HTML is GFM as GitHub renders it (markdown-it with tables), cut before the kernel-health section.
"""

from __future__ import annotations

import sys
from pathlib import Path

from markdown_it import MarkdownIt

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.github.aggregate import PrReport
from buildbot_bsdkm.model import RunResult, SelfTest, StageFailure
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import load_policy
from buildbot_bsdkm.report.markdown import markdown_report
from buildbot_bsdkm.support.resources import default_config_path, default_policy_path
from buildbot_bsdkm.triage.outcomes import BaseOutcome

SHARED = Path(sys.argv[1])
BSD, LINUX = SHARED / "freebsd" / "logs", SHARED / "fixtures" / "linuxkm"
META = {"wolfssl_version": "5.9.2", "fingerprint": {"id": "fp1"}}


def log(path: Path, source: str):
    parsed = parse_file(path)
    parsed.source = source
    return parsed


def bsd(variant: str, debug: str, release: str, failure: StageFailure | None = None) -> RunResult:
    out = f"out/freebsd-kmod-qemu/{variant}"
    return RunResult(variant, "freebsd-kmod-qemu", logs=[log(BSD / debug, f"{out}/console-debug.log"),
                     log(BSD / release, f"{out}/console-release.log")], failure=failure, metadata=dict(META))


def linux(variant: str, name: str) -> RunResult:
    console = log(LINUX / name, f"out/linux-kmod-qemu/{variant}/console.log")
    return RunResult(variant, "linux-kmod-qemu", logs=[console], metadata=dict(META))


def panic(where: str) -> StageFailure:
    return StageFailure("load", "debug kernel: kernel panic: panic: malloc: called with spinlock or "
                        f"critical section held (in {where})", reason="panic")


PASS = "release-kernel_aesni-fpecc_selftest-pass.log"
AESNI = "debug-kernel_aesni-nobench_aesni-panic.log"  # the main job's real 5.9.2 panic
known = bsd("intelasm", AESNI, PASS, panic("AES_set_decrypt_key_AESNI"))
pre = bsd("aesni-avx", "debug-kernel_plain_fpecc-panic.log", PASS, panic("add_entry"))
new = RunResult("noasm", "freebsd-kmod-qemu", metadata=dict(META),
                logs=[log(BSD / PASS, "out/freebsd-kmod-qemu/noasm/console-release.log")])
new.logs[0].tests.append(SelfTest("AES-GCM", False, " error L=7420 code=-216", -216))
flaky = linux("intelasm", "asm-full-bench.console.log")
flaky.logs[0].tests.append(SelfTest("ECC", False, " error L=39795", None))  # the Linux QEMU ECC flake
fixed = linux("noasm", "noasm-full-bench.console.log")
runs = [known, pre, new, flaky, fixed]

report = PrReport(load_policy(default_policy_path()), known=load_config(default_config_path()).known_issues)
first = report.verdict(runs)
fpecc = next(c.signature for c in first.failures if c.variant == "aesni-avx")
ecc = next(c.signature for c in first.failures if c.target == "linux-kmod-qemu")


def outcome(run: RunResult, kernel: str, i: int, sig: list[str]) -> BaseOutcome:
    return BaseOutcome(run.target, run.variant, kernel, "fail" if sig else "pass", sig,
                       f"{i:x}7c3e9d2a41b5f08", "5.9.2", f"2026-11-{20 + i:02d}T02:00:00Z", "fp1",
                       ["complete", "selftest", "kernel"])


base = []
for i in range(4):
    base.append(outcome(pre, "debug", i, [fpecc]))
    base.append(outcome(flaky, "", i, [ecc] if i in (0, 2) else []))
    base.append(outcome(fixed, "", i, ["selftest: ECC (-188)"] if i else []))
verdict = report.verdict(runs, base)
CSS = """body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI","Noto Sans",Helvetica,Arial,sans-serif;
font-size:14px;line-height:1.5;color:#1f2328;background:#fff;margin:0;padding:16px}
.comment{border:1px solid #d1d9e0;border-radius:6px;max-width:960px}
.head{background:#f6f8fa;border-bottom:1px solid #d1d9e0;padding:8px 16px;color:#59636e;
border-radius:6px 6px 0 0}
.head b{color:#1f2328}.body{padding:4px 16px 12px}
h2{font-size:1.5em;border-bottom:1px solid #d1d9e0b3;padding-bottom:.3em;margin:16px 0 12px}
h3{font-size:1.25em;margin:20px 0 10px}
table{border-collapse:collapse;display:block;overflow:auto;margin:0 0 12px;font-size:13px}
th,td{border:1px solid #d1d9e0;padding:5px 10px}th{font-weight:600}tr:nth-child(2n){background:#f6f8fa}
blockquote{margin:0 0 8px;padding:0 1em;color:#59636e;border-left:.25em solid #d1d9e0}
a{color:#0969da;text-decoration:none}p{margin:0 0 10px}code{font-size:85%}"""
text = "<!-- bsdkm-ci report -->\n" + markdown_report(runs, verdict)
Path(sys.argv[2]).write_text(text, encoding="utf-8")
html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text.split("### Kernel health")[0])
page = (f"<!doctype html><meta charset=utf-8><style>{CSS}</style><div class=comment>"
        f"<div class=head><b>bsdkm-ci</b> commented</div><div class=body>{html}</div></div>")
Path(sys.argv[3]).write_text(page, encoding="utf-8")
