"""A query plan's shape in one line, and what changed between two plans of the same query.

A TPROC-H query that gets slower under a tuned config is easily put down to "likely plan
changes", unchecked. pgdyno keeps every query's ``EXPLAIN (FORMAT JSON)`` and reduces it to what a
DBA reads first:

- the join tree with each join's method: ``hash(nested(orders, lineitem), customer)``;
- each base relation's scan: ``lineitem: index scan lineitem_pkey``;
- the parallel workers planned (the sum over Gather and Gather Merge nodes).

Costs and row estimates are left out on purpose: they differ between any two configs
(``random_page_cost``) while the plan stays the same, and the shape is what explains a
speedup or a regression. ``describe_change`` says, in one line, how two shapes differ.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

JOIN_METHODS = {"Hash Join": "hash join", "Nested Loop": "nested loop",
                "Merge Join": "merge join"}
SCAN_KINDS = {
    "Seq Scan": "seq scan", "Index Scan": "index scan", "Index Only Scan": "index only scan",
    "Bitmap Heap Scan": "bitmap scan", "Tid Scan": "tid scan", "Tid Range Scan": "tid scan",
    "Sample Scan": "sample scan",
}
SHORT = {"hash join": "hash", "nested loop": "nested", "merge join": "merge"}
MAX_CHANGES = 4
"""Changes named in one line; past that, "and N more" (the plan files hold the rest)."""


@dataclass(frozen=True)
class Join:
    method: str
    """"hash join", "nested loop" or "merge join"."""
    relations: tuple[str, ...]
    """Every base relation below the join, sorted: the join's identity across plans."""
    inner: tuple[str, ...]
    """The smaller side's relations: what this join brings in ("on lineitem")."""


@dataclass(frozen=True)
class PlanShape:
    tree: str
    """The join tree with methods and leaves: ``hash(nested(orders, lineitem), customer)``."""
    joins: tuple[Join, ...]
    scans: tuple[tuple[str, str], ...]
    """(relation, scan) per base relation scanned, in plan order."""
    workers_planned: int

    def line(self) -> str:
        """The shape in one line for a report table."""
        scans = ", ".join(f"{rel} {kind}" for rel, kind in self.scans)
        workers = f"; {self.workers_planned} parallel workers" if self.workers_planned else ""
        return f"{self.tree} [{scans}]{workers}"


def shape_of(explain: Any) -> PlanShape:
    """The shape of ``EXPLAIN (FORMAT JSON)`` output: the list PostgreSQL returns, or its
    first element, or a bare plan node."""
    root = explain[0] if isinstance(explain, list) else explain
    root = root.get("Plan", root)
    joins: list[Join] = []
    scans: list[tuple[str, str]] = []
    workers = [0]
    tree = _walk(root, joins, scans, workers)
    return PlanShape(tree=tree or "no joins", joins=tuple(joins), scans=tuple(scans),
                     workers_planned=workers[0])


def _walk(node: dict[str, Any], joins: list[Join], scans: list[tuple[str, str]],
          workers: list[int]) -> str:
    """The node's subtree as text (empty when it holds no relation); fills joins/scans."""
    kind = node.get("Node Type", "")
    if kind in ("Gather", "Gather Merge"):
        workers[0] += int(node.get("Workers Planned", 0))
    children = [c for c in node.get("Plans", []) if c.get("Parent Relationship") not in
                ("InitPlan", "SubPlan")]
    subplans = [c for c in node.get("Plans", []) if c not in children]
    if kind in SCAN_KINDS and "Relation Name" in node:
        name = _relation(node)
        scans.append((name, _scan(node)))
        parts = [name]
    elif kind in JOIN_METHODS:
        sides = [(_walk(c, joins, scans, workers), _relations(c)) for c in children]
        sides = [s for s in sides if s[0]]
        if len(sides) == 2:
            method = JOIN_METHODS[kind]
            rels = tuple(sorted(sides[0][1] + sides[1][1]))
            # The smaller side; on a tie the inner child (a hash join's build side).
            inner = sides[1][1] if len(sides[1][1]) <= len(sides[0][1]) else sides[0][1]
            joins.append(Join(method, rels, tuple(sorted(inner))))
            parts = [f"{SHORT[method]}({sides[0][0]}, {sides[1][0]})"]
        else:
            parts = [s[0] for s in sides]
    else:
        parts = [t for c in children if (t := _walk(c, joins, scans, workers))]
    # Sub-plans (correlated subqueries, InitPlans) are plans of their own: shown after.
    parts += [f"sub[{t}]" for c in subplans if (t := _walk(c, joins, scans, workers))]
    return ", ".join(parts)


def _relations(node: dict[str, Any]) -> list[str]:
    """The base relations scanned below ``node`` (not in its sub-plans)."""
    if node.get("Node Type") in SCAN_KINDS and "Relation Name" in node:
        return [_relation(node)]
    return [r for c in node.get("Plans", [])
            if c.get("Parent Relationship") not in ("InitPlan", "SubPlan")
            for r in _relations(c)]


def _relation(node: dict[str, Any]) -> str:
    """``lineitem``, or ``lineitem l2`` when the query names it by another alias (Q21
    scans lineitem three times)."""
    name, alias = node["Relation Name"], node.get("Alias", node["Relation Name"])
    return name if alias == name else f"{name} {alias}"


def _scan(node: dict[str, Any]) -> str:
    kind = SCAN_KINDS[node["Node Type"]]
    index = node.get("Index Name")
    if node["Node Type"] == "Bitmap Heap Scan":
        names = [c.get("Index Name") for c in _descendants(node) if c.get("Index Name")]
        index = "+".join(dict.fromkeys(names)) or None
    return f"{kind} {index}" if index else kind


def _descendants(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for c in node.get("Plans", []) for d in (c, *_descendants(c))]


def describe_change(a: PlanShape, b: PlanShape) -> str:
    """How plan ``b`` differs from ``a``, in one line; "" when the shapes are the same.

    "hash join → nested loop on lineitem, lineitem: seq scan → index scan lineitem_pkey,
    parallel workers 2 → 0"."""
    if a == b:
        return ""
    changes: list[str] = []
    b_joins = {j.relations: j for j in b.joins}
    same_sets = {j.relations for j in a.joins} == set(b_joins)
    for ja in a.joins:
        jb = b_joins.get(ja.relations)
        if jb is not None and jb.method != ja.method:
            changes.append(f"{ja.method} → {jb.method} on {_names(ja.inner)}")
    if not same_sets:
        changes.append(f"join order {a.tree} → {b.tree}")
    changes += _scan_changes(a.scans, b.scans)
    if a.workers_planned != b.workers_planned:
        changes.append(f"parallel workers {a.workers_planned} → {b.workers_planned}")
    if not changes:  # same joins, scans and workers: the order of the children changed
        changes.append(f"join inputs swapped: {a.tree} → {b.tree}")
    more = len(changes) - MAX_CHANGES
    shown = changes[:MAX_CHANGES] + ([f"and {more} more"] if more > 0 else [])
    return ", ".join(shown)


def _scan_changes(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> list[str]:
    """Per relation, scans that differ (a relation scanned twice compares as a multiset)."""
    out = []
    by_rel_a: dict[str, Counter[str]] = {}
    by_rel_b: dict[str, Counter[str]] = {}
    for rel, kind in a:
        by_rel_a.setdefault(rel, Counter())[kind] += 1
    for rel, kind in b:
        by_rel_b.setdefault(rel, Counter())[kind] += 1
    for rel in dict.fromkeys([r for r, _ in a] + [r for r, _ in b]):
        ka, kb = by_rel_a.get(rel, Counter()), by_rel_b.get(rel, Counter())
        if ka != kb:
            out.append(f"{rel}: {_kinds(ka - kb) or 'not scanned'} → "
                       f"{_kinds(kb - ka) or 'not scanned'}")
    return out


def _kinds(counts: Counter[str]) -> str:
    return " + ".join(k if n == 1 else f"{n}× {k}" for k, n in counts.items())


def _names(relations: tuple[str, ...]) -> str:
    return relations[0] if len(relations) == 1 else "{" + ", ".join(relations) + "}"


def most_common(shapes: list[PlanShape]) -> PlanShape | None:
    """The shape a query took most often over streams and iterations (parameters can tip
    a plan; the usual one is the one to compare)."""
    if not shapes:
        return None
    return Counter(shapes).most_common(1)[0][0]
