"""The claims ledger as cards: one card per claim, narrow enough for the text column and a phone.

A card says, for one claim: the claim in words (linked to the section that measures it), the
paper's value, ours per tier (this build, and the published `full` run when there is one), the
criterion, and a small grid of verdicts (one row per tier, one column per verdict column:
reproduced and robust). A column that does not judge the claim says why in one plain sentence
("not judged: the networks reached 0.627; judging this needs median accuracy >= 0.858"); every
precondition, with its column and source, is one click away in a ``<details>`` box.

Rendering only (:data:`symlib.book.provenance.RENDERING_ONLY`): nothing here changes a number or
a verdict.
"""

from __future__ import annotations

import html

from symlib.book.results import outcome
from symlib.book.words import reader_words, status_badge

__all__ = ["claim_card", "claim_numbers", "diagnosis_text", "glance", "ledger_cards", "not_judged_sentence", "tier_verdict"]

_COLUMNS = ("reproduced", "robust")
_MARK = {"both": "both columns", "reproduced": "reproduced column", "robust": "robust column"}


def tier_verdict(claim: dict | None, column: str) -> tuple[str, list[dict]]:
    """``(outcome, failed preconditions)`` of a stored claim in ``column``: ``holds`` / ``does
    not hold`` / ``not judged``, or ``—`` where the record has no such claim or (an old record)
    no robust verdict."""
    if claim is None:
        return "—", []
    verdicts = claim.get("verdicts") or {}
    if column in verdicts:
        v = verdicts[column]
        return outcome(v["holds"]), [p for p in v["preconditions"] if not p["met"]]
    if column == "reproduced":  # a record from before the two columns: its one verdict
        return outcome(claim["holds"]), [p for p in claim.get("preconditions") or [] if not p["met"]]
    return "—", []


def not_judged_sentence(failed: list[dict]) -> str:
    """One plain sentence: what the run reached against what judging needs (first failed
    precondition; the others counted)."""
    if not failed:
        return "no precondition recorded as failed"
    first = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return _words(f"reached {first['measured']}; judging needs {first['criterion']}{more}")


def claim_numbers(claims: list[dict]) -> dict[str, str]:
    """Each ledger entry's label in its chapter: the paper's claims numbered 1, 2, ... in the
    record's order, without a gap; code checks, which are not claims of the paper, lettered A, B,
    ... apart from them. The cards show the label and other text names an entry by it, not by its
    id."""
    labels, claims_seen, checks_seen = {}, 0, 0
    for c in claims:
        if c.get("kind", "claim") == "claim":
            claims_seen += 1
            labels[c["id"]] = str(claims_seen)
        else:
            labels[c["id"]] = _letters(checks_seen)
            checks_seen += 1
    return labels


def _letters(i: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA, ..."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("A") + r) + out
    return out


def _words(text: str) -> str:
    return reader_words(text)


def _badge(verdict: str, kind: str) -> str:
    return status_badge(verdict, kind)


def _cell(claim: dict | None, column: str, kind: str) -> str:
    verdict, failed = tier_verdict(claim, column)
    badge = _badge(verdict, kind)
    if verdict == "not judged":
        badge += f'<span class="symlib-why">{html.escape(not_judged_sentence(failed))}</span>'
    robust = ((claim or {}).get("verdicts") or {}).get("robust") or {}
    if column == "robust" and verdict == "does not hold" and robust.get("refuted_under"):
        badge += f'<span class="symlib-why">{html.escape(_words(refuted_sentence(robust["refuted_under"])))}</span>'
    if column == "reproduced" and (reference := (claim or {}).get("reference")):
        badge += f'<span class="symlib-why">{html.escape(_words("reference: " + reference))}</span>'
    return badge


def refuted_sentence(refuted_under: str) -> str:
    """Where a robust "does not hold" was found (``refuted_under``: the settings, ``"; "``-joined),
    short enough for a table cell: the first setting and how many more (the sweep table lists
    them all)."""
    settings = [s for s in refuted_under.split("; ") if s.strip()]
    more = len(settings) - 1
    tail = f" and {more} other setting{'s' if more > 1 else ''} of its sweep" if more > 0 else ""
    return f"fails with every robust precondition met under {settings[0] if settings else refuted_under}{tail}"


def diagnosis_text(claim: dict | None) -> str:
    """Why a stored claim does not hold, in words (its diagnoses joined), or ``""``."""
    return "; ".join(f"{d['cause']}: {d['detail']}" for d in (claim or {}).get("diagnosis") or [])


def _fails(claim: dict | None) -> bool:
    return any(tier_verdict(claim, col)[0] == "does not hold" for col in _COLUMNS)


def _preconditions(claim: dict | None, tier: str) -> str:
    pre = (claim or {}).get("preconditions") or []
    if not pre:
        return ""
    items = "".join(
        f'<li>{"✓" if p["met"] else "✗"} {html.escape(_words(p["criterion"]))}: '
        f'{html.escape(_words(str(p["measured"])))} '
        f'<span class="symlib-column">({_MARK[p.get("column", "both")]}'
        + (f"; source: {html.escape(p['source'])}" if p.get("source") else "") + ")</span></li>"
        for p in pre)
    met = sum(p["met"] for p in pre)
    return f"<p>{html.escape(tier)}: {met} of {len(pre)} met</p><ul>{items}</ul>"


def claim_card(claim: dict, *, tiers: dict[str, dict | None], href: str = "", anchor: str = "",
               stale_tiers: tuple[str, ...] = (), number: str | int | None = None) -> str:
    """One claim's card. ``tiers``: tier name -> that tier's stored version of the claim (None:
    the tier's record lacks it), in the order shown; ``claim`` gives the text, the paper's value
    and the criterion; ``number``: its label in the ledger (:func:`claim_numbers`)."""
    kind = claim.get("kind", "claim")
    title = html.escape(_words(claim["text"]))
    if href:
        title = f'<a class="reference internal" href="{href}">{title}</a>'
    if number is not None and kind == "claim":
        title = f'<span class="symlib-claim-no">Claim {number}.</span> {title}'
    elif number is not None:  # lettered apart: the claims' numbers have no gap
        title = f'<span class="symlib-check-no">Code check {number}.</span> {title}'
    if kind == "code check":
        title += ' <em class="symlib-kind">(a check of our code, not a claim of the paper: not counted)</em>'
    rows = "".join(
        f'<tr{" class=" + chr(34) + "symlib-stale" + chr(34) if tier in stale_tiers else ""}><th scope="row">'
        f"{html.escape(tier)}</th>" + "".join(f"<td>{_cell(c, col, kind)}</td>" for col in _COLUMNS) + "</tr>"
        for tier, c in tiers.items())
    grid = (f'<table class="symlib-verdicts"><caption class="symlib-sr">The two verdicts of this claim, per tier'
            "</caption><thead><tr><th></th><th>reproduced</th><th>robust</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")
    facts = [("paper", html.escape(claim["paper"]), ' class="symlib-paper"')]
    for tier, c in tiers.items():
        if c is not None:
            facts.append((f"ours ({tier})", html.escape(_words(c["ours"])), ""))
    if claim.get("criterion"):
        facts.append(("criterion", html.escape(_words(claim["criterion"])), ""))
    for tier, c in tiers.items():
        if _fails(c) and (why := diagnosis_text(c)):
            facts.append((f"why it does not hold ({tier})", html.escape(_words(why)), ' class="symlib-diagnosis"'))
    dl = "".join(f"<dt>{name}</dt><dd{cls}>{value}</dd>" for name, value, cls in facts)
    details = "".join(_preconditions(c, tier) for tier, c in tiers.items())
    more = f"<details><summary>Preconditions</summary>{details}</details>" if details else ""
    ident = f' id="{html.escape(anchor)}"' if anchor else ""
    return (f'<div class="symlib-claim-card"{ident}><p class="symlib-claim">{title}</p>{grid}'
            f'<dl class="symlib-facts">{dl}</dl>{more}</div>')


def ledger_cards(meta: dict, *, label: str, anchor: str, full_record: dict | None = None,
                 stale: list[str] | None = None, sections: dict[str, str] | None = None,
                 link_prefix: str = "", note: str = "", published_runs: dict | None = None) -> str:
    """A chapter's claims as captioned cards: this build's verdicts beside the published runs'
    (``published_runs``: tier -> ``(record, why it is stale)``, most converged first; or one
    ``full_record`` with its ``stale``)."""
    if published_runs is None:
        published_runs = {"full": (full_record, stale or [])} if full_record is not None else {}
    claims_of = {tier: {c["id"]: c for c in (record or {}).get("claims", [])}
                 for tier, (record, _) in published_runs.items()}
    stale_tiers = tuple(f"{tier} (published)" for tier, (_, why) in published_runs.items() if why)
    run = meta.get("profile", "this run")
    cards = []
    numbers = claim_numbers(meta["claims"])
    for c in meta["claims"]:
        # the most converged run first: the published runs (paper, then full), then this build
        tiers = {f"{tier} (published)": claims_of[tier].get(c["id"]) for tier in published_runs}
        tiers[f"{run} (this build)"] = c
        section = (sections or {}).get(c["id"])
        href = f"{link_prefix}#{section}" if section else ""
        cards.append(claim_card(c, tiers=tiers, href=href, anchor="" if link_prefix else f"claim-{c['id']}",
                                stale_tiers=stale_tiers, number=numbers[c["id"]]))
    caption = ("Claims ledger: each claim's criterion and preconditions, fixed before the run, and its two verdicts: "
               "reproduced (the paper's own protocol) and robust (today's standard)")
    tail = f'<p class="symlib-tier-note">{note}</p>' if note else ""
    return (f'<div class="symlib-ledger-cards" id="{anchor}"><p class="symlib-caption"><span class="caption-number">'
            f'{html.escape(label)} </span><span class="caption-text">{caption}</span></p>{"".join(cards)}{tail}</div>')


def glance(chapter: str, record: dict | None, *, stale: list[str] | None = None, provenance: str = "") -> str:
    """The box that opens a chapter: does each claim reproduce, in the published run in front
    (the most converged: ``paper`` when published, else ``full``)?

    One line per claim (code checks left out): its reproduced and robust verdicts and the claim,
    numbered as in the ledger (:func:`claim_numbers`) and linked to its card there
    (``#claim-<id>``); above them the counts and ``provenance`` (HTML,
    :func:`symlib.book.tables.provenance_line`). Without a published run, says so.
    """
    if record is None:
        return ('<div class="symlib-glance"><p><strong>Does it reproduce?</strong> No full run of this chapter is '
                "published yet: the verdicts below are this build's only.</p></div>")
    claims = [c for c in record.get("claims", []) if c.get("kind", "claim") == "claim"]
    counts = []
    for column in _COLUMNS:
        got = [tier_verdict(c, column)[0] for c in claims]
        parts = [f"{got.count(o)} {o}" for o in ("holds", "does not hold", "not judged") if got.count(o)]
        if got.count("—"):
            parts.append(f"{got.count('—')} not recorded")
        counts.append(f"{column}: {', '.join(parts) or 'no claims'}")
    numbers = claim_numbers(record.get("claims", []))
    lines = "".join(
        f'<li>{_badge(tier_verdict(c, "reproduced")[0], "claim")} {_badge(tier_verdict(c, "robust")[0], "claim")} '
        f'<span class="symlib-claim-no">{numbers[c["id"]]}.</span> '
        f'<a class="reference internal" href="#claim-{html.escape(c["id"])}">{html.escape(_words(c["text"]))}</a></li>'
        for c in claims)
    stale_note = " (computed by an older version of the code or profile)" if stale else ""
    prov = f' <span class="symlib-tier-note">{provenance}</span>' if provenance else ""  # HTML already
    tier = html.escape(str(record.get("profile") or "full"))
    return (f'<div class="symlib-glance"><p><strong>Does it reproduce?</strong> In the published {tier} run'
            f'{stale_note}, {len(claims)} claims: {"; ".join(counts)}. Each line: reproduced (the paper\'s own '
            f"protocol), robust (today's standard), the claim.{prov}</p><ul>{lines}</ul></div>")
