"""The offline internal link check of the built book."""

from symlib.book.linkcheck import broken_links


def test_finds_missing_pages_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="a/page.html#here">ok</a><a href="a/page.html#gone">bad anchor</a>'
        '<a href="missing.html">bad page</a><a href="https://example.org/x">external</a>'
        '<img src="a/pic.png"><a href="#top">self</a><span id="top"></span>')
    (tmp_path / "a" / "page.html").write_text('<div id="here"></div><a href="../index.html#top">back</a>')
    (tmp_path / "a" / "pic.png").write_bytes(b"")
    problems = broken_links(tmp_path)
    assert problems == ["index.html: a/page.html#gone (no anchor #gone)", "index.html: missing.html (no such file)"]


def test_clean_book_passes(tmp_path):
    (tmp_path / "index.html").write_text('<a href="#x">x</a><p id="x"></p>')
    assert broken_links(tmp_path) == []
