"""Where the book says its code and its published copy are (book/_ext/symbook_pages.py): the
repository and address of _config.yml, filled in at build time only where left empty."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import symbook_pages as pages

GITHUB_VARS = ("SYMLIB_REPOSITORY_URL", "SYMLIB_REPOSITORY_BRANCH", "GITHUB_REPOSITORY", "GITHUB_SERVER_URL",
               "GITHUB_ACTIONS")


@pytest.fixture
def no_remote(monkeypatch):
    for var in GITHUB_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pages, "ROOT", Path("/nonexistent-checkout"))  # no git remote to read


def _config(url="", branch="main", baseurl=""):
    return SimpleNamespace(html_theme_options={"repository_url": url, "repository_branch": branch},
                           html_baseurl=baseurl)


def test_the_configured_repository_is_used_and_an_override_wins(no_remote, monkeypatch):
    assert pages.repository_url("git@github.com:someone/book.git") == "https://github.com/someone/book"
    monkeypatch.setenv("GITHUB_REPOSITORY", "actions/repo")
    assert pages.repository_url("https://github.com/someone/book") == "https://github.com/someone/book"
    assert pages.repository_url("") == "https://github.com/actions/repo"
    monkeypatch.setenv("SYMLIB_REPOSITORY_URL", "https://gitlab.com/other/book")
    assert pages.repository_url("https://github.com/someone/book") == "https://gitlab.com/other/book"


def test_pages_address_of_a_github_repository():
    assert pages.pages_url("https://github.com/SomeOne/book") == "https://someone.github.io/book/"
    assert pages.pages_url("https://github.com/someone/someone.github.io") == "https://someone.github.io/"
    assert pages.pages_url("https://gitlab.com/someone/book") is None
    assert pages.pages_url(None) is None


def test_github_actions_fills_what_the_config_leaves_empty(no_remote, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_REPOSITORY", "someone/book")
    config = _config()
    pages.resolve(config)
    assert config.html_theme_options["repository_url"] == "https://github.com/someone/book"
    assert config.html_theme_options["use_repository_button"] is True
    assert config.html_baseurl == "https://someone.github.io/book/"
    kept = _config(baseurl="https://book.example.org/")  # a custom domain, set in _config.yml
    pages.resolve(kept)
    assert kept.html_baseurl == "https://book.example.org/"


def test_a_local_build_names_no_site_it_cannot_know(no_remote, monkeypatch):
    config = _config(url="https://github.com/someone/book")
    pages.resolve(config)
    assert config.html_baseurl == ""
    assert config.html_theme_options["repository_url"] == "https://github.com/someone/book"
    bare = _config()
    pages.resolve(bare)
    assert bare.html_theme_options["repository_url"] == "" and "use_repository_button" not in bare.html_theme_options


def test_the_landing_page_links_and_never_tells_the_reader_how_to_build():
    both = pages.code_location_html("https://github.com/someone/book", "main", "https://someone.github.io/book/")
    assert '<a href="https://someone.github.io/book/">' in both and '<a href="https://github.com/someone/book">' in both
    for html in (both, pages.code_location_html(None), pages.code_location_html(None, site="https://x.org/")):
        assert "SYMLIB_REPOSITORY_URL" not in html and "when building" not in html
    assert "notebooks/" in pages.code_location_html(None)


def test_binder_opens_the_chapters_sources_as_notebooks_in_jupyterlab(no_remote):
    """The launch button opens JupyterLab on a chapter's MyST source in an image Binder can build:
    binder/ installs symlib with the book's extras at the constraints' pins (torch from its CPU
    index) and makes jupytext's notebook the default viewer of markdown and MyST files."""
    import json

    import yaml

    config = _config(url="https://github.com/someone/book")
    pages.resolve(config)
    launch = config.html_theme_options["launch_buttons"]
    assert launch["binderhub_url"] == "https://mybinder.org" and launch["notebook_interface"] == "jupyterlab"
    assert yaml.safe_load((ROOT / "_config.yml").read_text())["launch_buttons"]["notebook_interface"] == "jupyterlab"
    assert pages.source_path("executed/03_sgm_vi") == "notebooks/03_sgm_vi.md"
    assert (ROOT / "notebooks" / "03_sgm_vi.md").is_file()
    env = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    assert {"pip", "make", "cxx-compiler"} <= set(env["dependencies"])  # PyStan compiles chapter 4's models
    post = ROOT / "binder" / "postBuild"
    assert post.stat().st_mode & 0o111, "postBuild must be executable"
    script = post.read_text()
    torch_pin = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch=="))
    for needed in ("-c constraints.txt", torch_pin, '-e ".[book]"', "jupyterlab", "download.pytorch.org/whl/cpu",
                   "binder/overrides.json"):
        assert needed in script, needed
    viewers = json.loads((ROOT / "binder" / "overrides.json").read_text())
    assert viewers["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"] == {
        "markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}
