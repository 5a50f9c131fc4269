"""Bad input: every fixture parses, and garbage, NULs, CRLF, huge lines, invalid UTF-8,
truncation and missing files give named problems, never an exception. Plus the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES

from buildbot_bsdkm import cli
from buildbot_bsdkm.model import LogFormat, from_json
from buildbot_bsdkm.parsers import (
    ParseError,
    ParseSummary,
    detect_format,
    iter_records,
    parse_file,
    parse_lines,
    parse_text,
)
from buildbot_bsdkm.parsers.text import MAX_LINE_CHARS

LOG_SUFFIXES = (".txt", ".log")
ALL_LOGS = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.is_file() and p.name.endswith(LOG_SUFFIXES) and not p.name.endswith(".sh.txt")
)
BENCH = FIXTURES / "userspace/accel/bench_default.txt"


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_parses_without_input_errors(path: Path) -> None:
    log = parse_file(path)
    assert log.source == str(path)
    assert not [p for p in log.problems if p.severity == "error"]
    # A log either is complete or says why not.
    assert log.complete or log.incomplete_reason


def test_detect_format() -> None:
    def first(rel: str) -> list[str]:
        return (FIXTURES / rel).read_text(errors="replace").splitlines()[:400]

    assert detect_format(first("userspace/accel/bench_default.txt")) == LogFormat.WOLFCRYPT_BENCH
    assert detect_format(first("userspace/accel/bench_csv.txt")) == LogFormat.WOLFCRYPT_BENCH_CSV
    assert detect_format(first("userspace/accel/testwolfcrypt.txt")) == LogFormat.WOLFCRYPT_TEST
    assert detect_format(first("linuxkm/asm-full-bench.console.log")) == LogFormat.LINUX_KERNEL_LOG
    assert detect_format(first("openssl/speed_sha256_rsa2048_multi2.stdout.txt")) == LogFormat.OPENSSL_SPEED
    assert detect_format(["info: libwolfssl loaded"]) == LogFormat.FREEBSD_KERNEL_LOG
    assert detect_format(["hello", "world"]) == LogFormat.UNKNOWN


def test_iter_records_ends_with_one_summary_and_streams() -> None:
    with BENCH.open() as f:
        records = list(iter_records(f))
    assert isinstance(records[-1], ParseSummary)
    assert sum(isinstance(r, ParseSummary) for r in records) == 1
    assert records[-1].complete and records[-1].lines == len(BENCH.read_text().splitlines()) == 127


def test_crlf_gives_the_same_numbers() -> None:
    text = BENCH.read_text()
    plain = parse_text(text, "lf")
    crlf = parse_text(text.replace("\n", "\r\n"), "crlf")
    assert [(b.name, b.value, b.cycles) for b in crlf.benchmarks] == [
        (b.name, b.value, b.cycles) for b in plain.benchmarks
    ]
    assert crlf.complete


def test_nul_bytes_and_invalid_utf8_are_named_with_their_line() -> None:
    lines = BENCH.read_bytes().split(b"\n")
    lines[9] = lines[9][:20] + b"\x00\x00" + lines[9][20:]
    lines[11] = b"\xff\xfe garbage \xc3"
    log = parse_lines(lines, "dirty")
    assert {(p.line, "NUL" in p.message) for p in log.problems} >= {(10, True)}
    assert any(p.line == 12 and "invalid UTF-8" in p.message for p in log.problems)
    assert log.complete  # the rest of the log still counts


def test_enormous_line_is_cut_and_reported(tmp_path: Path) -> None:
    text = BENCH.read_text().split("\n")
    text.insert(10, "A" * (5 * 1024 * 1024))
    path = tmp_path / "huge.txt"
    path.write_text("\n".join(text))
    log = parse_file(path)
    (problem,) = [p for p in log.problems if p.line == 11]
    assert f"first {MAX_LINE_CHARS}" in problem.message
    assert log.complete and len(log.benchmarks) == 119


def test_truncated_in_the_middle_of_a_line() -> None:
    text = BENCH.read_text()
    cut = text[: text.index("AES-256-GCM-enc") + 30]
    log = parse_text(cut, "cut")
    assert not log.complete and "no 'Benchmark complete'" in log.incomplete_reason
    assert log.benchmarks[-1].name == "AES-192-GCM-dec"


def test_garbage_text_is_not_a_pass() -> None:
    log = parse_text("lorem ipsum\n\x1b[31mred\x1b[0m\n" * 50, "garbage")
    assert not log.complete and log.incomplete_reason and not log.benchmarks


def test_missing_file_directory_and_binary_raise_parse_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"nope\.log: no such file"):
        parse_file(tmp_path / "nope.log")
    with pytest.raises(ParseError, match="is a directory"):
        parse_file(tmp_path)
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(ParseError, match=r"core\.bin: binary data"):
        parse_file(binary)


def test_binary_text_through_parse_text_does_not_raise() -> None:
    log = parse_text(bytes(range(256)) * 16, "bytes")
    assert not log.complete and any("binary" in p.message for p in log.problems)


def test_problem_flood_is_capped() -> None:
    log = parse_lines([b"\xff\x00"] * 5000, "flood")
    assert len(log.problems) <= 205
    assert any("more problems not listed" in p.message for p in log.problems)


# --------------------------------------------------------------------- CLI
def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["parse", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, str(BENCH), "--json", "--variant", "intelasm", "--target", "userspace")
    assert rc == cli.EXIT_OK
    (run,) = from_json(out)
    assert (run.variant, run.target) == ("intelasm", "userspace")
    items = {b.name: b for b in run.benchmarks}
    assert items["AES-128-GCM-enc"].value == 4092.779
    assert json.loads(out)["runs"][0]["logs"][0]["complete"] is True


def test_cli_exit_1_for_failed_or_incomplete(capsys: pytest.CaptureFixture[str]) -> None:
    failed = FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt"
    rc, out, _ = run_cli(capsys, str(failed))
    assert rc == cli.EXIT_FAILED and "PWDBASED" in out and "FAILED" in out
    rc, out, _ = run_cli(capsys, str(FIXTURES / "userspace/accel/bench_timeout3_TERM.txt"))
    assert rc == cli.EXIT_FAILED and "INCOMPLETE" in out
    rc, _, _ = run_cli(capsys, str(Path(__file__).parents[2] / "data/freebsd/fips-hash-mismatch.log"))
    assert rc == cli.EXIT_FAILED  # nothing tested, but the module failed to load


def test_cli_exit_2_names_the_unusable_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run_cli(capsys, str(BENCH), str(tmp_path / "missing.log"))
    assert rc == cli.EXIT_UNUSABLE and "missing.log: no such file" in err


def test_cli_format_override(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(
        capsys,
        "--format",
        "wolfcrypt-bench",
        "--json",
        str(FIXTURES / "userspace/accel/bench_lng1_japanese.txt"),
    )
    assert rc == cli.EXIT_OK and from_json(out)[0].logs[0].format == LogFormat.WOLFCRYPT_BENCH
