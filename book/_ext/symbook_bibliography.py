"""Bibliography labels in the text's own form: "Gelberg et al., 2024", not "[GvdOvdWG24]".

The prose cites author-year (``bibtex_reference_style: author_year``), but pybtex's formatting
styles label the list of references with alpha codes, so a reader could not match a citation to
its entry. This registers a pybtex formatting style, ``symbook`` (pybtex's ``plain``, sorted by
author, year and title, with author-year labels), and ``_config.yml`` selects it with
``bibtex_default_style``.
"""

from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


def _last_name(person) -> str:
    """A person's last name as a reader sees it (LaTeX accents resolved: ``Sch{\\"o}lkopf``)."""
    return " ".join(Text.from_latex(part).render_as("text") for part in person.last_names)


def author_year_label(entry) -> str:
    """``Kurle et al., 2021``; ``Hendrycks and Gimpel, 2017``; ``Smith, 2020`` (editors where an
    entry has no authors; the citation key where it has neither)."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in people]
    if not names:
        who = entry.key
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    year = entry.fields.get("year", "")
    return f"{who}, {year}" if year else who


class AuthorYearLabelStyle(BaseLabelStyle):
    """Author-year labels; two entries with the same label get a, b, ... after the year."""

    def format_labels(self, sorted_entries):
        labels = [author_year_label(entry) for entry in sorted_entries]
        counts = {label: labels.count(label) for label in labels}
        seen: dict[str, int] = {}
        for label in labels:
            if counts[label] == 1:
                yield label
            else:
                seen[label] = seen.get(label, 0) + 1
                yield label + chr(ord("a") + seen[label] - 1)


class AuthorYearStyle(PlainStyle):
    """pybtex's ``plain`` style with :class:`AuthorYearLabelStyle` labels."""

    default_label_style = AuthorYearLabelStyle


def setup(app):
    register_plugin("pybtex.style.labels", "symbook_author_year", AuthorYearLabelStyle)
    register_plugin("pybtex.style.formatting", "symbook", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
