-- Q11 Important Stock Identification: a nation's parts worth a significant share of its stock.
select
    ps_partkey,
    sum(ps_supplycost * ps_availqty) as value
from partsupp, supplier, nation
where ps_suppkey = s_suppkey
    and s_nationkey = n_nationkey
    and n_name = {nation}
group by ps_partkey
having sum(ps_supplycost * ps_availqty) > (
    select sum(ps_supplycost * ps_availqty) * {fraction}
    from partsupp, supplier, nation
    where ps_suppkey = s_suppkey
        and s_nationkey = n_nationkey
        and n_name = {nation}
)
order by value desc
