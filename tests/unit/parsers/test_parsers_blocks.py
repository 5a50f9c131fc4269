"""Block reading (files in 1 MiB blocks, other iterables in batches) gives exactly the
records of the plain line-by-line engine, whatever falls on a block boundary."""

from __future__ import annotations

import io

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.parsers import api, detect_format, iter_records
from buildbot_bsdkm.parsers.detect import DETECT_LINES
from buildbot_bsdkm.parsers.engine import LogParser
from buildbot_bsdkm.parsers.text import MAX_LINE_CHARS


def line_by_line(raws: list[bytes] | list[str], fmt: str | None = None) -> list[object]:
    """The reference: every raw line through ``feed_into``, one at a time."""
    if fmt is None:
        fmt = detect_format(api._as_text(x) for x in raws[:DETECT_LINES])
    parser = LogParser(fmt)  # type: ignore[arg-type]
    out: list[object] = []
    for raw in raws:
        parser.feed_into(raw, out)  # type: ignore[arg-type]
    return out + parser.finish()


def file_lines(data: bytes) -> list[bytes]:
    """What iterating a binary file yields (lines keep their b"\\n")."""
    return io.BytesIO(data).readlines()


DIRTY = (
    b"[    1.000000] wolfssl: wolfcrypt_test(): AES-GCM  test passed!\r\n"
    b"[    1.000000] wolfssl: wolfcrypt_test(): AES-GCM  test passed!\r\n"  # dmesg repeat
    b"progress 10%\rprogress 100%\r\n"  # overwritten in place
    b"SHA-256     10 MiB took 1.000 seconds,   10.000 MiB/s\r\r\n"
    b"AES-128-GCM-enc   45.0 MiB took 1.024 seconds, 43.930 MiB/s\x00 Cycles per byte = 56.36\n"
    b"\x1b[31mRSA     2048  private   100 ops took 1.000 sec, avg 10.000 ms, 100.000 ops/sec\x1b[0m\n"
    b"\xff\xfe garbage \xc3\n"
    b"   \t \n"
    b"\n" + b"A" * (MAX_LINE_CHARS + 500) + b"\n"
    b"Math: \tMulti-Precision: Wolf(SP)\n\tSingle Precision: rsa/dh 2048\n"
    b"Benchmark AES-128-GCM-enc failed: -180\n"
    b"\xe5\x87\xa6\xe7\x90\x86/\xe7\xa7\x92 Japanese \xe5\x87\xa6\n"
)


def inputs() -> list[tuple[str, bytes]]:
    cases = []
    for rel in (
        "userspace/accel/bench_default.txt",
        "userspace/accel/bench_csv.txt",
        "userspace/accel/bench_lng1_japanese.txt",
        "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt",
        "linuxkm/asm-busybox-insmod-hidden-retry.console.log",
        "openssl/speed_sha256_rsa2048_multi2_MERGED.merged.txt",
    ):
        cases.append((rel, (FIXTURES / rel).read_bytes()))
    bench = (FIXTURES / "userspace/accel/bench_default.txt").read_bytes()
    cases.append(("dirty-in-bench", bench[:2000] + DIRTY + bench[2000:] + DIRTY.rstrip(b"\n")))
    cases.append(("dirty-only", DIRTY * 3))
    return cases


@pytest.mark.parametrize("block", [1, 7, 100, 4096, 1 << 20])
@pytest.mark.parametrize(("name", "data"), inputs(), ids=[n for n, _ in inputs()])
def test_file_blocks_match_line_by_line(
    monkeypatch: pytest.MonkeyPatch, name: str, data: bytes, block: int
) -> None:
    monkeypatch.setattr(api, "_BLOCK_BYTES", block)
    expected = line_by_line(file_lines(data))
    assert list(iter_records(io.BytesIO(data))) == expected
    text = data.decode("utf-8", "replace")
    assert list(iter_records(io.StringIO(text, newline=""))) == line_by_line(
        io.StringIO(text, newline="").readlines()
    )


@pytest.mark.parametrize("batch", [1, 3, 4096])
@pytest.mark.parametrize(("name", "data"), inputs(), ids=[n for n, _ in inputs()])
def test_line_batches_match_line_by_line(
    monkeypatch: pytest.MonkeyPatch, name: str, data: bytes, batch: int
) -> None:
    monkeypatch.setattr(api, "_BATCH_LINES", batch)
    raws = data.split(b"\n")
    assert list(iter_records(raws)) == line_by_line(raws)
    texts = data.decode("utf-8", "replace").split("\n")
    assert list(iter_records(texts)) == line_by_line(texts)
    mixed: list[str | bytes] = [x if i % 2 else x.encode() for i, x in enumerate(texts)]
    assert list(iter_records(mixed)) == line_by_line(mixed)  # type: ignore[arg-type]


def test_over_long_line_across_blocks_is_cut_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "_BLOCK_BYTES", 1000)
    bench = (FIXTURES / "userspace/accel/bench_default.txt").read_bytes()
    lines = bench.split(b"\n")
    data = b"\n".join(lines[:10] + [b"B" * (3 * api._READ_LIMIT + 17)] + lines[10:])
    records = list(iter_records(io.BytesIO(data)))
    (cut,) = [r for r in records if getattr(r, "line", None) == 11 and "characters long" in str(r)]
    assert f"{api._READ_LIMIT}+ characters" in cut.message  # type: ignore[union-attr]
    assert records[-1].lines == len(lines) + 1 - (not lines[-1])  # type: ignore[union-attr]
    assert records[-1].complete  # type: ignore[union-attr]
