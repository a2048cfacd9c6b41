-- Q14 Promotion Effect: the share of a month's revenue from promotional parts.
select
    100.00 * sum(case
        when p_type like 'PROMO%' then l_extendedprice * (1 - l_discount)
        else 0
    end) / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from lineitem, part
where l_partkey = p_partkey
    and l_shipdate >= {date}
    and l_shipdate < {date} + interval '1' month
