-- Q16 Parts/Supplier Relationship: suppliers able to supply parts of given attributes.
select
    p_brand,
    p_type,
    p_size,
    count(distinct ps_suppkey) as supplier_cnt
from partsupp, part
where p_partkey = ps_partkey
    and p_brand <> {brand}
    and p_type not like {type}
    and p_size in ({sizes})
    and ps_suppkey not in (
        select s_suppkey
        from supplier
        where s_comment like '%Customer%Complaints%'
    )
group by p_brand, p_type, p_size
order by supplier_cnt desc, p_brand, p_type, p_size
