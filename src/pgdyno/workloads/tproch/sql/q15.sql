-- Q15 Top Supplier: the suppliers with the highest revenue in a quarter (a view per stream).
create view {view} (supplier_no, total_revenue) as
select
    l_suppkey,
    sum(l_extendedprice * (1 - l_discount))
from lineitem
where l_shipdate >= {date}
    and l_shipdate < {date} + interval '3' month
group by l_suppkey;

select
    s_suppkey,
    s_name,
    s_address,
    s_phone,
    total_revenue
from supplier, {view}
where s_suppkey = supplier_no
    and total_revenue = (
        select max(total_revenue)
        from {view}
    )
order by s_suppkey;

drop view {view}
