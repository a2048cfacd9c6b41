"""Plan shapes and their one-line changes, on EXPLAIN (FORMAT JSON) trees written as
PostgreSQL 18 prints them (trimmed to the keys the shape reads)."""

from __future__ import annotations

from pgdyno.workloads.tproch.plans import describe_change, most_common, shape_of


def scan(rel: str, kind: str = "Seq Scan", index: str | None = None,
         alias: str | None = None) -> dict:
    node = {"Node Type": kind, "Relation Name": rel, "Alias": alias or rel}
    if index:
        node["Index Name"] = index
    return node


def join(kind: str, outer: dict, inner: dict) -> dict:
    return {"Node Type": kind, "Plans": [outer | {"Parent Relationship": "Outer"},
                                        inner | {"Parent Relationship": "Inner"}]}


def hashed(node: dict) -> dict:
    return {"Node Type": "Hash", "Plans": [node | {"Parent Relationship": "Outer"}]}


def gather(node: dict, workers: int) -> dict:
    return {"Node Type": "Gather", "Workers Planned": workers,
            "Plans": [node | {"Parent Relationship": "Outer"}]}


def explain(root: dict) -> list:
    return [{"Plan": {"Node Type": "Aggregate", "Plans": [root | {"Parent Relationship":
                                                                 "Outer"}]}}]


Q_HASH = explain(gather(join("Hash Join", scan("lineitem"),
                             hashed(join("Hash Join", scan("orders"),
                                         hashed(scan("customer"))))), 2))
Q_NESTED = explain(join("Nested Loop", join("Hash Join", scan("orders"),
                                            hashed(scan("customer"))),
                        scan("lineitem", "Index Scan", "lineitem_pkey")))


def test_shape_reads_joins_scans_and_workers() -> None:
    shape = shape_of(Q_HASH)
    assert shape.tree == "hash(lineitem, hash(orders, customer))"
    assert [(j.method, j.relations, j.inner) for j in shape.joins] == [
        ("hash join", ("customer", "orders"), ("customer",)),
        ("hash join", ("customer", "lineitem", "orders"), ("lineitem",))]
    assert shape.scans == (("lineitem", "seq scan"), ("orders", "seq scan"),
                           ("customer", "seq scan"))
    assert shape.workers_planned == 2
    assert "2 parallel workers" in shape.line()


def test_change_names_method_scan_and_workers() -> None:
    line = describe_change(shape_of(Q_HASH), shape_of(Q_NESTED))
    assert "hash join → nested loop on lineitem" in line
    assert "lineitem: seq scan → index scan lineitem_pkey" in line
    assert "parallel workers 2 → 0" in line
    assert describe_change(shape_of(Q_HASH), shape_of(Q_HASH)) == ""


def test_join_order_change_and_aliases() -> None:
    a = explain(join("Hash Join", join("Hash Join", scan("lineitem", alias="l1"),
                                       hashed(scan("lineitem", alias="l2"))),
                     hashed(scan("nation", alias="n1"))))
    b = explain(join("Hash Join", join("Hash Join", scan("lineitem", alias="l1"),
                                       hashed(scan("nation", alias="n1"))),
                     hashed(scan("lineitem", alias="l2"))))
    line = describe_change(shape_of(a), shape_of(b))
    assert line.startswith("join order hash(hash(lineitem l1, lineitem l2), nation n1) → "
                           "hash(hash(lineitem l1, nation n1), lineitem l2)")


def test_subplans_and_bitmap_scans() -> None:
    bitmap = {"Node Type": "Bitmap Heap Scan", "Relation Name": "orders", "Alias": "orders",
              "Plans": [{"Node Type": "Bitmap Index Scan", "Index Name": "orders_date_idx",
                         "Parent Relationship": "Outer"}]}
    sub = {"Node Type": "Aggregate", "Parent Relationship": "SubPlan",
           "Plans": [scan("lineitem", "Index Scan", "lineitem_pkey")
                     | {"Parent Relationship": "Outer"}]}
    root = {"Node Type": "Sort", "Plans": [bitmap | {"Parent Relationship": "Outer"}, sub]}
    shape = shape_of([{"Plan": root}])
    assert shape.scans == (("orders", "bitmap scan orders_date_idx"),
                           ("lineitem", "index scan lineitem_pkey"))
    assert shape.tree == "orders, sub[lineitem]"
    assert not shape.joins


def test_most_common_shape() -> None:
    a, b = shape_of(Q_HASH), shape_of(Q_NESTED)
    assert most_common([a, b, b]) == b
    assert most_common([]) is None
