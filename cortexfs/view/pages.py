"""What each page of the site shows, as plain data, and its rendering.

Each page's data is built from the model without rendering anything; its digest (with the
code's identity and, for an atom page, its file's stat data) is the page's key in the site
manifest, so that a page is rendered only when something it shows changed. The templates
(`templates/view/`) render in Jinja's sandbox with autoescape on: every value from the
store is escaped there, and what is HTML already (rendered markdown, the charts) is built
by cortexfs.view.markdown and cortexfs.view.charts, which escape it themselves. A store
cannot override these templates: its own HTML would run in the user's browser.

An atom page is the one exception, for speed (a first build makes one per atom): its
template is only its frame, rendered once per project and kind, and its main part is
assembled by `atom_main` with the same escaper (cortexfs.escape.html, markupsafe's), which
is what Jinja's autoescape calls too — the pages are byte for byte what the template made.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import marshal
import os
import posixpath
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from cortexfs import cache
from cortexfs.atoms import ATOM_ID, KINDS
from cortexfs.escape import html, url_part
from cortexfs.layout import MISSION_MD, ROADMAP_MD, STATUS_MD
from cortexfs.regen.render import COLD_DAYS, HOT_REFS
from cortexfs.tasks import TASK_STATUSES, sort_key
from cortexfs.templates import package_dir
from cortexfs.view import CSP, charts
from cortexfs.view.markdown import id_parts
from cortexfs.view.markdown import render as render_md
from cortexfs.view.model import RELATIONS, AtomModel, ProjectModel

if TYPE_CHECKING:
    import jinja2
    from markdown_it import MarkdownIt

CHAIN_DEPTH, CHAIN_MAX = 3, 60
DECAY_SHOWN = 100
CITES_LABEL = {"experiment": "Links", "knowledge": "Evidence", "pattern": "Sources"}
_ID_FIELDS = ("evidence", "source-experiments", "links")


def digest(*parts: Any) -> str:
    """The key of a page made from `parts` (plain data: what marshal can write)."""
    return cache.digest(marshal.dumps(parts, 2)).hex()


def identity() -> str:
    """What every page also depends on: this package's code and its templates. (The
    assets are not: a page only names them, and they are keyed by their own content.)"""
    stamps: list[Any] = [cache.code_key()]
    for entry in sorted(os.scandir(package_dir("templates") / "view"), key=lambda e: e.name):
        if entry.is_file():
            st = entry.stat()
            stamps.append((entry.name, st.st_mtime_ns, st.st_size))
    return digest(*stamps)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The sandboxed, autoescaping Jinja environment of the packaged view templates."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(package_dir("templates"))),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)


def render(page: str, **values: Any) -> str:
    return environment().get_template(f"view/{page}.html.j2").render(
        csp=CSP, page=page, **values)


# --- the atom page ---------------------------------------------------------------------------


def mentions(body: str) -> list[str]:
    """The atom ids a body names (linked on its page when they exist)."""
    return sorted(set(ATOM_ID.findall(body)))


def atom_key(ident: str, pm: ProjectModel, am: AtomModel, named: list[str]) -> str:
    """What an atom page shows, digested without building it: the signatures of the atom,
    of the atoms in its evidence chain and backlinks, and where the ids its body names
    lead (its body itself is known by its stamp, in its signature)."""
    related: list[AtomModel] = []
    _chain_nodes(am, related)
    related += [source for _, source in pm.backlinks.get(am.stem, [])]
    resolved = [(i, t.stem if (t := pm.resolve(i)) else None) for i in named]
    return digest(ident, pm.name, am.signature, [r.signature for r in related], resolved)


def atom_data(pm: ProjectModel, am: AtomModel) -> dict[str, Any]:
    """Everything an atom page shows but its body."""
    a = am.atom
    by_relation: dict[str, list[dict[str, Any]]] = {}
    for relation, source in pm.backlinks.get(am.stem, []):
        by_relation.setdefault(relation, []).append(_face(source.atom.id, source))
    backlinks = [(label, by_relation[r]) for r, label in RELATIONS.items() if r in by_relation]
    status_ref = next((_face(i, t) for r, i, t in am.cited if r == "status"), None)
    return {
        "project": pm.name, "stem": am.stem, "id": a.id, "kind": a.kind.name,
        "summary": a.summary, "status_text": am.status_text, "status_class": am.status_class,
        "group": am.group, "status_ref": status_ref,
        "invalidated_date": str(a.meta.get("invalidated-date") or ""),
        "invalidated_reason": str(a.meta.get("invalidated-reason") or ""),
        "day": am.day, "refs": a.refs, "last_ref": a.last_ref,
        "card": _card(pm, am), "file": f"{a.kind.folder}/{a.path.name}",
        "backlinks": backlinks, "chain": [_chain_data(n) for n in _chain_nodes(am, [])],
        "reads": sorted(am.reads.items(), reverse=True), "reads_total": sum(am.reads.values()),
    }


def _face(atom_id: str, target: AtomModel | None) -> dict[str, Any]:
    """How a page shows an atom it names: id, link, status and summary (no link, struck
    through, when no such atom exists)."""
    if target is None:
        return {"id": atom_id, "href": None}
    return {"id": atom_id, "href": target.href, "status_text": target.status_text,
            "status_class": target.status_class, "summary": target.atom.summary}


def _card(pm: ProjectModel, am: AtomModel) -> list[tuple[str, list[dict[str, Any]]]]:
    """The frontmatter, key by key: ids and tags as links, anything else as text."""
    out = []
    for key, value in am.atom.meta.items():
        parts: list[dict[str, Any]]
        if key in _ID_FIELDS and isinstance(value, (list, str)):
            items = value if isinstance(value, list) else [value]
            parts = [_id_part(pm, str(v)) for v in items]
        elif key == "tags" and isinstance(value, list):
            parts = [{"text": str(t), "href": f"index.html#tag={url_part(str(t))}", "cls": "tag"}
                     for t in value]
        elif key == "status" and am.atom.status_ref:
            parts = [{"text": f"{am.status}:", "href": None, "cls": ""},
                     _id_part(pm, am.atom.status_ref)]
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            parts = [{"text": str(value), "href": None, "cls": ""}]
        else:  # true/false, null, nested values: as YAML would read them, in JSON
            parts = [{"text": json.dumps(value, ensure_ascii=False, default=str), "href": None,
                      "cls": ""}]
        out.append((str(key), parts))
    return out


def _id_part(pm: ProjectModel, atom_id: str) -> dict[str, Any]:
    target = pm.resolve(atom_id)
    if target is None:
        return {"text": atom_id, "href": None, "cls": "missing"}
    return {"text": atom_id, "href": target.href, "cls": "atom-ref"}


# (relation, id, the atom or None, what it rests on)
ChainNode = tuple[str, str, "AtomModel | None", list[Any]]


def _chain_nodes(am: AtomModel, visited: list[AtomModel]) -> list[ChainNode]:
    """What the atom rests on — evidence, source experiments, the atom its status names —
    and what those rest on, CHAIN_DEPTH levels deep and CHAIN_MAX atoms at most; the
    atoms met are appended to `visited`."""
    budget = [CHAIN_MAX]

    def walk(node: AtomModel, depth: int, seen: frozenset[str]) -> list[ChainNode]:
        out: list[ChainNode] = []
        for relation, atom_id, target in node.cited:
            if relation == "link" or budget[0] <= 0:
                continue
            budget[0] -= 1
            children: list[ChainNode] = []
            if target is not None:
                visited.append(target)
                if depth < CHAIN_DEPTH and target.stem not in seen:
                    children = walk(target, depth + 1, seen | {target.stem})
            out.append((relation, atom_id, target, children))
        return out

    return walk(am, 1, frozenset({am.stem}))


def _chain_data(node: ChainNode) -> dict[str, Any]:
    relation, atom_id, target, children = node
    return {**_face(atom_id, target), "relation": relation,
            "children": [_chain_data(c) for c in children]}


def render_atom(md: MarkdownIt, pm: ProjectModel, data: dict[str, Any], body: str | None) -> str:
    """An atom page: its frame (templates/view/atom.html.j2, made once per project and
    kind) around its main part, assembled here as strings (atom_main)."""
    if body is not None:
        body = _without_title(body, data["id"])
    body_html = render_md(md, body, pm.href) if body and body.strip() else ""
    title = html(data["id"])
    frame = _atom_frame(pm.name, data["kind"])
    return "".join((frame[0], title, frame[1], title, frame[2], atom_main(data, body_html),
                    frame[3]))


_SLOT = "\x00slot\x00"  # where the frame's per-atom parts go (no project name holds it)


@lru_cache(maxsize=64)
def _atom_frame(project: str, kind_name: str) -> tuple[str, ...]:
    """The atom page's template rendered around slots: before the title, before the last
    breadcrumb, before the main part, after it (the same for every atom of a kind in a
    project)."""
    kind = KINDS[[k.name for k in KINDS].index(kind_name)]
    page = render("atom", root="../../", id=_SLOT, main=Markup(_SLOT),
                  crumbs=[(project, "index.html"), (kind.title, f"index.html#{kind.folder}"),
                          (_SLOT, None)])
    parts = tuple(page.split(_SLOT))
    assert len(parts) == 4, "templates/view/atom.html.j2 must show id, crumbs and main once"
    return parts


def atom_main(data: dict[str, Any], body_html: str) -> str:
    """An atom page's main part (atom_data's `data`, the body as HTML already), every value
    escaped by cortexfs.escape.html. Plain strings rather than a template: a first build
    makes 10,000 of these, and this takes a fifth of the time the template took."""
    e = _html
    group = data["group"]
    out = [f'<article class="atom g-{e(group)}">\n<h1><code>{e(data["id"])}</code> '
           f'{e(data["summary"])}</h1>\n<p class="meta">{e(data["kind"])} · '
           f'{_badge(data["status_text"], data["status_class"])}']
    if data["day"]:
        out.append(f" · {e(data['day'])}")
    refs = data["refs"]
    out.append(f" · {int(refs)} read{'s' if refs != 1 else ''}")
    if data["last_ref"]:
        out.append(f" · last {e(data['last_ref'])}")
    out.append("</p>\n")
    status_ref = data["status_ref"]
    by = f" by {_ref(status_ref)}" if status_ref else ""
    if group == "invalidated":
        out.append(f'<p class="warning tombstone">Invalidated{by}')
        if data["invalidated_date"]:
            out.append(f" on {e(data['invalidated_date'])}")
        out.append(": do not build on its conclusions.")
        if data["invalidated_reason"]:
            out.append(f" Reason: {e(data['invalidated_reason'])}")
        out.append("</p>\n")
    elif group == "superseded":
        out.append(f'<p class="notice">{e(data["status_text"].capitalize())}{by}: read the '
                   "newer atom first.</p>\n")
    out.append('<div class="atom-grid">\n  <div class="body">')
    out.append(f'<div class="md">{body_html}</div>' if body_html
               else '<p class="empty">The file has no body.</p>')
    out.append('</div>\n  <aside>\n    <section class="card">\n      <h2>Frontmatter</h2>\n'
               "      <dl>\n")
    for key, parts in data["card"]:
        # (a part's class is one of _card's own names)
        items = " ".join(f'<a href="{e(p["href"])}" class="{p["cls"]}">{e(p["text"])}</a>'
                         if p["href"] else f'<span class="{p["cls"]}">{e(p["text"])}</span>'
                         for p in parts)
        out.append(f"        <dt>{e(key)}</dt><dd>{items}</dd>\n")
    out.append(f'      </dl>\n      <p class="muted file">{e(data["file"])}</p>\n'
               "    </section>\n    <section>\n      <h2>Backlinks</h2>\n")
    for label, items in data["backlinks"]:
        links = "".join(f"<li>{_ref(b)}</li>" for b in items)
        out.append(f"      <h3>{e(label)}</h3>\n      <ul>{links}</ul>\n")
    if not data["backlinks"]:
        out.append('<p class="empty">No atom cites this one.</p>\n')
    out.append("    </section>\n    <section>\n      <h2>Evidence chain</h2>\n")
    out.append(_chain_list(data["chain"]) if data["chain"]
               else '<p class="empty">It rests on no other atom.</p>')
    out.append("    </section>\n    <section>\n      <h2>Read history</h2>\n")
    reads = data["reads"]
    if reads:
        total, days = data["reads_total"], len(reads)
        rows = "".join(f'<tr><td>{e(day)}</td><td class="num">{int(n)}</td></tr>'
                       for day, n in reads[:14])
        out.append(f"      <p>{int(total)} read{'s' if total != 1 else ''} logged on {days} "
                   f"day{'s' if days != 1 else ''}.</p>\n"
                   f"      {charts.reads_chart(dict(reads))}\n"
                   f'      <table class="reads-table"><tbody>{rows}</tbody></table>\n')
        if days > 14:
            out.append(f'<p class="muted">… and {days - 14} earlier days.</p>')
    else:
        out.append('<p class="empty">Never read (by the access log).</p>')
    out.append("    </section>\n  </aside>\n</div>\n</article>\n")
    return "".join(out)


# cortexfs.escape.html, remembered: the keys, dates, tags and statuses of 10,000 pages are
# mostly the same few values
_html = lru_cache(maxsize=1 << 16)(html)


def _badge(status_text: str, status_class: str) -> str:
    return f'<span class="status st-{html(status_class)}">{html(status_text)}</span>'


def _ref(x: dict[str, Any]) -> str:
    """An atom named on a page (a _face): its link, status and summary, or its id struck
    through when there is no such atom."""
    if x["href"]:
        return _atom_ref(x["href"], x["id"], x["status_text"], x["status_class"], x["summary"])
    return f'<span class="missing" title="no such atom in this project">{html(x["id"])}</span>'


@lru_cache(maxsize=4096)
def _atom_ref(href: str, atom_id: str, status_text: str, status_class: str, summary: str) \
        -> str:
    # (the same atoms are named on many pages: evidence chains and backlinks overlap)
    return (f'<a class="atom-ref" href="{html(href)}">{html(atom_id)}</a> '
            f'{_badge(status_text, status_class)} {html(summary)}')


def _chain_list(nodes: list[dict[str, Any]]) -> str:
    items = "".join(f'<li><span class="relation">{html(n["relation"])}</span> {_ref(n)}\n'
                    f'{_chain_list(n["children"]) if n["children"] else ""}</li>\n'
                    for n in nodes)
    return f"<ul>\n{items}</ul>\n"


def _without_title(body: str, atom_id: str) -> str:
    """The body without its first line when that is the `# EXP-001: summary` heading the
    templates start it with (the page's own title says it already)."""
    stripped = body.lstrip("\n")
    first, _, rest = stripped.partition("\n")
    if first.startswith(f"# {atom_id}"):
        return rest
    return body


# --- the project page ------------------------------------------------------------------------


def project_key(ident: str, pm: ProjectModel) -> str:
    """What a project page shows, digested without building it."""
    return digest(ident, pm.name, [am.signature for am in pm.atoms], pm.texts,
                  pm.tasks.text if pm.tasks else None, pm.tasks_error,
                  [(e.path, e.reason, e.line) for e in pm.errors], pm.symlinks)


def project_data(pm: ProjectModel) -> dict[str, Any]:
    """Everything a project page shows (the governance files as their markdown text)."""
    tables = []
    experiments = []
    for kind in KINDS:
        rows: list[dict[str, Any]] = []
        for am in (x for x in pm.atoms if x.atom.kind is kind):
            a = am.atom
            refs = a.refs
            rows.append({
                "id": a.id, "href": am.href, "day": am.day, "summary": a.summary,
                "tags": a.tags, "refs": refs, "hot": refs >= HOT_REFS, "status": am.status,
                "group": am.group, "status_text": am.status_text,
                "status_class": am.status_class,
                "cites": [_face(i, t) for r, i, t in am.cited
                          if (r == "link") == (kind.name == "experiment") and r != "status"]})
            if kind.name == "experiment":
                experiments.append({"day": am.day, "stem": am.stem, "id": a.id,
                                    "summary": a.summary, "status": am.status,
                                    "group": am.group})
        rows.sort(key=lambda r: (-r["refs"], r["day"] == "", _neg_day(r["day"]), r["id"]))
        tables.append({"title": kind.title, "folder": kind.folder, "rows": rows,
                       "cites_label": CITES_LABEL[kind.name],
                       "statuses": sorted({r["status"] for r in rows}),
                       "tags": sorted({t for r in rows for t in r["tags"]})})
    names = {am.atom.path.name: (am.atom.id, am.href) for am in pm.atoms}
    return {
        "name": pm.name, "phase": pm.phase, "texts": pm.texts, "tables": tables,
        "experiments": experiments, "heat": charts.heat(pm.history, names),
        "tasks_error": pm.tasks_error, **_tasks(pm),
        "errors": [{"path": os.path.relpath(e.path, pm.project.root), "line": e.line,
                    "reason": e.reason} for e in pm.errors],
        "symlinks": pm.symlinks,
    }


def _neg_day(day: str) -> str:
    """A key that sorts ISO days newest first."""
    return "".join(chr(0x10FFFF - ord(c)) for c in day)


def _tasks(pm: ProjectModel) -> dict[str, Any]:
    tf = pm.tasks
    if tf is None:
        return {"task_columns": [], "task_problems": []}
    status_of = {t.id: t.status for t in tf.tasks}
    columns: dict[str, list[dict[str, Any]]] = {s: [] for s in ("todo", "doing", "blocked",
                                                                "done")}
    for task in sorted(tf.tasks, key=sort_key):
        columns.setdefault(task.status if task.status in TASK_STATUSES else "todo", []).append({
            "id": task.id, "text": _linked(pm, task.text), "priority": "" if task.priority is None
            else str(task.priority), "why": _linked(pm, task.why or ""),
            "done_when": _linked(pm, task.done_when or ""),
            "completed": task.completed_at.isoformat() if task.completed_at else "",
            "depends": [{"id": d, "known": d in status_of, "status": status_of.get(d, "")}
                        for d in task.depends_on]})
    return {"task_columns": [{"status": s, "tasks": ts} for s, ts in columns.items()],
            "task_problems": [{"line": p.line, "message": p.message} for p in tf.problems]}


def _linked(pm: ProjectModel, text: str) -> list[dict[str, Any]]:
    """A line of text in parts, the ids of atoms of the project as links to their pages."""
    return [{"text": part, "href": href} for part, href in id_parts(text, pm.href)]


def render_project(md: MarkdownIt, pm: ProjectModel, data: dict[str, Any]) -> str:
    texts = {}
    for name, key in ((STATUS_MD, "status_html"), (MISSION_MD, "mission_html"),
                      (ROADMAP_MD, "roadmap_html")):
        text = data["texts"].get(name)
        texts[key] = Markup(render_md(md, text, pm.href)) if text and text.strip() else ""
    return render("project", root="../../", crumbs=[(pm.name, None)],
                  timeline=charts.timeline(data["experiments"]), **texts, **data)


# --- the store page and the rest -------------------------------------------------------------


def store_row(pm: ProjectModel) -> dict[str, Any]:
    """A project's row on the store page (kept with the site's state, so that a project
    that did not change is not read again for it). `unread_days`: the dates of its active
    atoms never read, from which the cold count is taken on the day the page is made."""
    kinds = [0, 0, 0]
    groups = {"active": 0, "superseded": 0, "invalidated": 0}
    hot = 0
    unread = []
    for am in pm.atoms:
        a = am.atom
        refs = a.refs
        kinds[KINDS.index(a.kind)] += 1
        groups[am.group] += 1
        hot += refs >= HOT_REFS
        if am.group == "active" and refs == 0 and am.day:
            unread.append(am.day)
    return {"name": pm.name, "href": f"p/{url_part(pm.name)}/index.html", "phase": pm.phase,
            "kinds": kinds, "groups": groups, "hot": hot, "unread_days": sorted(unread),
            "reads": sum(pm.stats.counts.values()), "last": pm.last_activity(),
            "open_tasks": pm.open_tasks(), "errors": len(pm.errors)}


def store_data(home: str, today: dt.date, rows: list[dict[str, Any]], decay: list[Any],
               total_projects: int, skipped: list[str], page_exists: Any) -> dict[str, Any]:
    """The store page: one row per project (store_row), totals, the decay queue (entries
    of cortexfs.hippocampus; `page_exists(rel)` tells which have a page to link to)."""
    from cortexfs.hippocampus import DECAY_THRESHOLD

    cutoff = (today - dt.timedelta(days=COLD_DAYS)).isoformat()
    rows = [{**r, "cold": bisect.bisect_left(r["unread_days"], cutoff)} for r in rows]
    totals = {"kinds": [sum(r["kinds"][i] for r in rows) for i in range(3)],
              "groups": {g: sum(r["groups"][g] for r in rows) for g in
                         ("active", "superseded", "invalidated")},
              **{k: sum(r[k] for r in rows) for k in ("hot", "cold", "reads", "open_tasks")},
              "last": max((r["last"] for r in rows if r["last"]), default=None)}
    shown = []
    for entry in decay[:DECAY_SHOWN]:
        stem = posixpath.basename(entry.pointer)[:-3]
        rel = f"p/{url_part(entry.project)}/{url_part(stem)}.html"
        shown.append({"id": entry.id, "project": entry.project, "summary": entry.summary,
                      "href": rel if page_exists(rel) else None,
                      "strength": f"{entry.strength:.3f}", "accessed": entry.accessed_day,
                      "hits": entry.hits})
    return {"home": home, "today": today.isoformat(), "rows": rows, "totals": totals,
            "decay": shown, "decay_more": max(0, len(decay) - DECAY_SHOWN),
            "decay_threshold": DECAY_THRESHOLD, "hot_refs": HOT_REFS, "cold_days": COLD_DAYS,
            "shown": len(rows), "total_projects": total_projects, "skipped": skipped}


def render_store(data: dict[str, Any]) -> str:
    return render("store", root="", crumbs=[], **data)


def graph_key(ident: str, pm: ProjectModel) -> str:
    return digest(ident, pm.name, [am.signature for am in pm.atoms])


def graph_data(pm: ProjectModel) -> dict[str, Any]:
    """A project's atoms and what cites what, compactly, for assets/graph.js: nodes
    [stem, id, kind 0-2, refs, group 0-2, status class, summary, day]; edges [from, to,
    type: 0 evidence, 1 source, 2 link, 3 status]."""
    index = {am.stem: i for i, am in enumerate(pm.atoms)}
    groups = ("active", "superseded", "invalidated")
    types = {"evidence": 0, "source": 1, "link": 2, "status": 3}
    nodes, edges = [], []
    for am in pm.atoms:
        a = am.atom
        nodes.append([am.stem, a.id, KINDS.index(a.kind), a.refs, groups.index(am.group),
                      am.status_class, a.summary[:160], am.day])
        seen = set()
        for relation, _, target in am.cited:
            if target is None or target is am or (target.stem, relation) in seen:
                continue
            seen.add((target.stem, relation))
            edges.append([index[am.stem], index[target.stem], types[relation]])
    return {"project": pm.name, "nodes": nodes, "edges": edges}


def render_graph(pm: ProjectModel) -> str:
    return render("graph", root="../../", name=pm.name, name_url=url_part(pm.name),
                  crumbs=[(pm.name, "index.html"), ("graph", None)])


def render_search() -> str:
    return render("search", root="", crumbs=[("search", None)])
