"""Names from logs and results ping nobody and link nowhere in Markdown GitHub renders."""

from __future__ import annotations

from buildbot_bsdkm.report.blocks import ZWSP, code, md_inline, md_paragraph, md_text, unlinked


def test_a_mention_after_a_backtick_is_broken() -> None:
    # the backtick is escaped, so it renders as a plain character and GitHub would read the @
    out = md_text("`@wolfSSL/ci-admins")
    assert f"@{ZWSP}wolfSSL" in out and "@wolfSSL" not in out
    assert f"@{ZWSP}x" in md_inline("bench `@x")


def test_bare_urls_in_names_are_no_links() -> None:
    for name in ("[click me](https://evil.example/)", "see https://evil.example/x", "http://a.b",
                 "ftp://x.y/z", "visit www.evil.example", "WWW.Evil.example"):
        for out in (md_text(name), md_inline(name), md_paragraph(name), unlinked(name)):
            assert "://" not in out and "www." not in out.lower(), (name, out)
            assert out.replace(ZWSP, "").replace("\\", "") == name.replace("\\", ""), (name, out)


def test_code_spans_and_plain_words_stay_as_written() -> None:
    assert md_inline("source " + code("git:https://github.com/wolfSSL/wolfssl.git")) == \
        "source `git:https://github.com/wolfSSL/wolfssl.git`"
    assert md_text("user@example.org") == "user@example.org"
    assert md_text("AES-128-GCM 16384") == "AES-128-GCM 16384"
