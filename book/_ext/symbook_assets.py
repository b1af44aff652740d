"""Drop duplicate <script> entries from every page (runs first: later handlers may end the event).

Jupyter Book 1.x with Sphinx 7 registers the inline configuration scripts of sphinx-thebe and
sphinx-togglebutton twice, and the second ``const THEBE_JS_URL = ...`` is a JavaScript
SyntaxError in every page. Keeping the first of each identical script fixes it.
"""


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts is None:
        return
    seen, unique = set(), []
    for script in scripts:
        key = (str(getattr(script, "filename", script) or ""), tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    # In place: it is the builder's own list, to which later handlers (MathJax) still add.
    scripts[:] = unique


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=1)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
