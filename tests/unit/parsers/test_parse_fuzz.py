"""Fuzzing: random text, mutated real fixture lines and binary bytes never raise."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildbot_bsdkm.model import LogFormat, LogResult
from buildbot_bsdkm.parsers import ParseError, ParseSummary, iter_records, parse_file, parse_lines, parse_text
from buildbot_bsdkm.parsers.formats import registrations

SAMPLES = [
    "userspace/accel/bench_default.txt",
    "userspace/accel/bench_csv.txt",
    "userspace/accel/bench_lng1_japanese.txt",
    "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt",
    "userspace/x_machineparse/bench_subset_csv.txt",
    "userspace/x_nofloatfmt/bench_subset_csv.txt",
    "linuxkm/asm-busybox-insmod-hidden-retry.console.log",
    "openssl/speed_sha256_rsa2048_multi2_MERGED.merged.txt",
]
FIXTURE_LINES = sorted(
    {line for rel in SAMPLES for line in (FIXTURES / rel).read_text(errors="replace").splitlines() if line}
)
FREEBSD_LINES = sorted(
    {
        line
        for p in (Path(__file__).parents[2] / "data/freebsd").glob("*.log")
        for line in p.read_text().splitlines()
    }
)
ALL_LINES = FIXTURE_LINES + FREEBSD_LINES
FORMATS = st.sampled_from([None, *[e.format for e in registrations()]])  # every format with a parser
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_sane(log: LogResult) -> None:
    assert isinstance(log.complete, bool)
    assert log.complete or log.incomplete_reason
    for b in log.benchmarks:
        assert isinstance(b.value, float) and b.name


@st.composite
def mutated_line(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(ALL_LINES))
    op = draw(st.sampled_from(["cut", "insert", "delete", "swap_digits", "dup", "none"]))
    if not line or op == "none":
        return line
    i = draw(st.integers(0, len(line)))
    if op == "cut":
        return line[:i]
    if op == "insert":
        return line[:i] + draw(st.text(max_size=12)) + line[i:]
    if op == "delete":
        j = draw(st.integers(i, len(line)))
        return line[:i] + line[j:]
    if op == "swap_digits":
        return line.translate(str.maketrans("0123456789.,", "9876543210,."))
    return line + line


@FUZZ
@given(st.text(max_size=3000), FORMATS)
def test_random_text_never_raises(text: str, fmt: LogFormat | None) -> None:
    assert_sane(parse_text(text, "random", fmt))


@FUZZ
@given(st.lists(mutated_line(), max_size=60), FORMATS)
def test_mutated_fixture_lines_never_raise(lines: list[str], fmt: LogFormat | None) -> None:
    assert_sane(parse_lines(lines, "mutated", fmt))


@FUZZ
@given(st.lists(st.sampled_from(ALL_LINES), min_size=1, max_size=80))
def test_shuffled_real_lines_never_raise_and_end_with_a_summary(lines: list[str]) -> None:
    records = list(iter_records(lines))
    assert isinstance(records[-1], ParseSummary)


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=40), FORMATS)
def test_binary_lines_never_raise(lines: list[bytes], fmt: LogFormat | None) -> None:
    assert_sane(parse_lines(lines, "binary", fmt))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=5000))
def test_parse_file_on_arbitrary_bytes_returns_or_names_the_file(tmp_path_factory, data: bytes) -> None:  # noqa: ANN001
    path = tmp_path_factory.mktemp("fuzz") / "input.log"
    path.write_bytes(data)
    try:
        assert_sane(parse_file(path))
    except ParseError as e:
        assert str(path) in str(e)
