"""The book's page furniture: per-chapter figure numbers, repository and launch buttons, styles.

- Figures are numbered per chapter, with the chapter's own number: chapter 2a's first figure is
  "Fig. 2a.1" (Sphinx numbers them across the whole book otherwise), and ``{numref}`` follows.
- The repository, source, edit, issue and launch (Binder) buttons appear when the repository URL
  is known at build time: ``SYMLIB_REPOSITORY_URL``, else ``repository.url`` in ``_config.yml``,
  else ``GITHUB_SERVER_URL/GITHUB_REPOSITORY`` (set in GitHub Actions), else the git remote
  ``origin``; without one they are left out. The branch is ``SYMLIB_REPOSITORY_BRANCH``, else
  ``repository.branch`` (``main``). ``html.baseurl``, the published book's address, is taken in
  GitHub Actions from a github.com repository (its Pages site) when ``_config.yml`` leaves it
  empty. The landing page links to both (``{code-location}``). The buttons' links point at the
  MyST sources in ``notebooks/`` and ``book/`` (``executed/`` is a build output). Colab opens only
  ``.ipynb`` files from a repository, which this one does not commit, so it is not offered.
- ``book/_static/symlib.css``: tables, captions, the ledger's status colours.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def chapter_label(docname: str) -> str | None:
    """``executed/02a_symmetry_removal`` -> ``2a``; None for pages that are not chapters."""
    m = re.match(r"executed/(\d+)([a-z]?)_", docname)
    return f"{int(m[1])}{m[2]}" if m else None


def _per_chapter_numbers(app, env):
    """Renumber figures (and numbered tables, code) from 1 in each chapter, prefixed by it."""
    for docname, by_type in env.toc_fignumbers.items():
        label = chapter_label(docname)
        if label is None:
            continue
        for figtype, numbers in by_type.items():
            order = sorted(numbers, key=lambda k: numbers[k])
            by_type[figtype] = {key: (label, i) for i, key in enumerate(order, 1)}
    return []


def repository_url(configured: str = "") -> str | None:
    """The repository's https URL at build time, or None: ``SYMLIB_REPOSITORY_URL``, else
    ``configured`` (``repository.url`` of ``_config.yml``), else GitHub Actions' repository, else
    the git remote ``origin``."""
    url = os.environ.get("SYMLIB_REPOSITORY_URL", "").strip() or (configured or "").strip()
    if not url and os.environ.get("GITHUB_REPOSITORY"):
        url = f"{os.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{os.environ['GITHUB_REPOSITORY']}"
    if not url:
        try:
            url = subprocess.run(["git", "remote", "get-url", "origin"], check=False, cwd=ROOT, capture_output=True,
                                 text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            url = ""
    m = re.match(r"^(?:git@([^:]+):|ssh://git@([^/]+)/|https?://(?:[^@/]+@)?([^/]+)/)([^/]+)/([^/]+?)(?:\.git)?/?$", url)
    if not m:
        return None
    host = m[1] or m[2] or m[3]
    return f"https://{host}/{m[4]}/{m[5]}"


def pages_url(repository: str | None) -> str | None:
    """The GitHub Pages address the ``book`` workflow publishes a github.com repository's book
    to (``https://owner.github.io/repo/``; ``https://owner.github.io/`` for the repository
    ``owner.github.io``), or None for another host."""
    m = re.match(r"^https://github\.com/([^/]+)/([^/]+)$", repository or "")
    if not m:
        return None
    owner, repo = m[1].lower(), m[2]
    return f"https://{owner}.github.io/" if repo.lower() == f"{owner}.github.io" else f"https://{owner}.github.io/{repo}/"


def resolve(config) -> None:
    """Fill ``_config.yml``'s ``repository`` and ``html.baseurl`` where they are left empty (the
    module docstring says from where), and turn on the buttons when a repository is known. The
    published address is taken from the repository only in GitHub Actions (the ``book``
    workflow publishes there): a local build names no site it cannot know exists."""
    opts = config.html_theme_options
    url = repository_url(opts.get("repository_url", ""))
    if not config.html_baseurl and url and os.environ.get("GITHUB_ACTIONS") == "true":
        config.html_baseurl = pages_url(url) or ""
    if not url:
        opts["repository_url"] = ""
        return
    opts.update({
        "repository_url": url,
        "repository_branch": os.environ.get("SYMLIB_REPOSITORY_BRANCH") or opts.get("repository_branch") or "main",
        "path_to_docs": "",
        "use_repository_button": True,
        "use_issues_button": True,
        "use_edit_page_button": True,
        "use_source_button": True,
    })
    if "github.com" in url:
        opts["launch_buttons"] = {**opts.get("launch_buttons", {}), "binderhub_url": "https://mybinder.org",
                                  "colab_url": "", "notebook_interface": "jupyterlab"}


def _buttons(app, config):
    resolve(config)


def code_location_html(repository: str | None, branch: str = "main", site: str | None = None) -> str:
    """The landing page's paragraph: links to the published book (``site``) and to the code
    (``repository``). Without a repository it names the folders that hold the code; it never
    makes an address up."""
    online = (f'This book is published at <a href="{site}">{site}</a>. ' if site else "")
    if repository:
        return (f'<p class="symlib-code-location">{online}Its code, every chapter\'s notebook and the '
                f'<code>symlib</code> library, is at <a href="{repository}">{repository}</a> (branch '
                f"<code>{branch}</code>): <code>git clone {repository}</code>, then <code>make test</code> and "
                "<code>make book</code>. Each page's buttons link to its source and can download it as "
                "<code>.md</code> or <code>.ipynb</code>.</p>")
    return (f'<p class="symlib-code-location">{online}Its code is the repository this copy was built from: '
            "every chapter's notebook is in <code>notebooks/</code>, the <code>symlib</code> library in "
            "<code>symlib/</code>, and each page's download button gives its source as <code>.md</code> or "
            "<code>.ipynb</code>.</p>")


class CodeLocation:
    """``{code-location}``: where the book is published and where its code is, from the settings
    that also drive the repository and launch buttons (``repository`` and ``html.baseurl`` in
    ``_config.yml``, filled by :func:`resolve`)."""

    @staticmethod
    def directive():
        from docutils import nodes
        from docutils.parsers.rst import Directive

        class _CodeLocation(Directive):
            has_content = False

            def run(self):
                config = self.state.document.settings.env.config
                opts = config.html_theme_options
                html = code_location_html(opts.get("repository_url") or None, opts.get("repository_branch") or "main",
                                          config.html_baseurl or None)
                return [nodes.raw("", html, format="html")]

        return _CodeLocation


def source_path(docname: str) -> str | None:
    """Where a built page's source lives in the repository (None: it is not a generated page)."""
    if docname in ("executed/reproducibility", "executed/using-symlib"):  # pipeline.BOOK_PAGES
        return f"book/{docname.split('/', 1)[1]}.md"
    if docname.startswith("executed/"):
        return f"notebooks/{docname.split('/', 1)[1]}.md"
    return None


def _retarget(app, pagename, templatename, context, doctree):
    """Point the buttons of pages built from ``executed/`` at their MyST sources."""
    target = source_path(pagename)
    if target is None:
        return
    pattern = re.compile(re.escape(pagename) + r"\.ipynb")

    def fix(buttons):
        for button in buttons:
            # the repository's and launchers' links; the download of the built page stays as it is
            if isinstance(button.get("url"), str) and button["url"].startswith("http"):
                button["url"] = pattern.sub(target, button["url"])
            if isinstance(button.get("buttons"), list):
                fix(button["buttons"])

    fix(context.get("header_buttons", []))


_CODE = re.compile(r"(``.*?``|`[^`]*`)")


def _plain_bars(app, what, name, obj, options, lines):
    """Docstrings write norms as ``|x|``; outside code and literal blocks reST would read
    ``|x|`` as a substitution, so the bars are escaped for the API pages."""
    literal_indent = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None and line.strip() and indent <= literal_indent:
            literal_indent = None
        if literal_indent is None and "|" in line and not line.lstrip().startswith(("|", "+")):
            parts = _CODE.split(line)
            lines[i] = "".join(p if j % 2 else p.replace("|", "\\|") for j, p in enumerate(parts))
        if literal_indent is None and line.rstrip().endswith("::"):
            literal_indent = indent


_NAME = re.compile(r"^(symlib(?:\.\w+)+)(?:\(\))?$")


def _link_api_names(app, doctree, fromdocname):
    """Make every ``symlib.…`` name written as code in a page a link to its API entry."""
    from docutils import nodes

    if not fromdocname.startswith("executed/") and not fromdocname.startswith("book/intro"):
        return
    py = app.env.get_domain("py")
    for lit in list(doctree.findall(nodes.literal)):
        m = _NAME.match(lit.astext().strip())
        if not m or isinstance(lit.parent, nodes.reference):
            continue
        name = m[1]
        entry = py.objects.get(name) or py.modules.get(name)
        parts = name.split(".")
        if entry is None and len(parts) > 3:  # symlib.pkg.module.f: documented at its public home, symlib.pkg.f
            entry = py.objects.get(".".join([*parts[:2], parts[-1]]))
        if entry is None:
            continue
        uri = app.builder.get_relative_uri(fromdocname, entry.docname) + "#" + entry.node_id
        ref = nodes.reference("", "", internal=True, refuri=uri, classes=["symlib-api"])
        lit.replace_self(ref)
        ref.append(lit)


def setup(app):
    app.add_directive("code-location", CodeLocation.directive())
    app.connect("doctree-resolved", _link_api_names)
    app.connect("autodoc-process-docstring", _plain_bars)
    app.connect("config-inited", _buttons)
    app.connect("env-get-updated", _per_chapter_numbers, priority=900)
    app.connect("html-page-context", _retarget, priority=900)
    app.add_css_file("symlib.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
