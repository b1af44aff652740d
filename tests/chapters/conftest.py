"""Fixtures shared by the chapter tests."""

import pytest


@pytest.fixture(scope="module")
def sandbox(request, tmp_path_factory):
    """A cache and results folder of the test module's own: ``(root, monkeypatch)``; the module's
    runs share it (so a second run can be served from the cache) and no other module sees it."""
    root = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYMLIB_CACHE", str(root / "cache"))
        mp.setenv("SYMLIB_RESULTS", str(root / "results"))
        yield root, mp


@pytest.fixture(autouse=True)
def figures_readable_on_the_page(monkeypatch):
    """Every figure a chapter test draws, drawn in the house style as the book draws it, shows no
    text under :data:`~symlib.book.plotting.MIN_TEXT_PX` pixels in the book's text column (a
    figure wider than the column is shown scaled down, and its legend with it)."""
    import matplotlib.figure

    from symlib.book import plotting

    drawn = []
    init = matplotlib.figure.Figure.__init__

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        drawn.append(self)

    monkeypatch.setattr(matplotlib.figure.Figure, "__init__", tracked)
    with plotting.style():
        yield
    small = [(fig.get_suptitle() or [a.get_title() for a in fig.axes][:1], round(plotting.smallest_text_px(fig), 1))
             for fig in drawn if plotting.smallest_text_px(fig) < plotting.MIN_TEXT_PX]
    assert not small, f"figure text under {plotting.MIN_TEXT_PX} px in the text column: {small}"
