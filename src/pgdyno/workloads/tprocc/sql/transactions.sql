-- The five TPROC-C transactions, one function each, so that a transaction is one round
-- trip (pgbench sends "SELECT tprocc_x(...)").
--
-- Errors are never caught here: a serialization failure (40001) or a deadlock (40P01)
-- leaves the function, pgbench sees its SQLSTATE, rolls back and retries the whole
-- transaction under --max-tries, and counts it. Catching them would hide contention.
--
-- New-Order with an invalid item (TPC-C clause 2.4.2.3) returns 0 instead of raising:
-- the error path of pgbench aborts the client for any other SQLSTATE, so the driver
-- script of that variant wraps the call in BEGIN ... ROLLBACK and the rollback is real
-- (the order, its lines and the district's d_next_o_id increment all disappear, and
-- pg_stat_database.xact_rollback counts it). See scripts.py.
--
-- The terminal's random inputs are drawn here, in the same statement as the call
-- (SELECT tprocc_x(d.a, ...) FROM tprocc_draw_x(...) AS d), not by pgbench: fifteen order
-- lines are some fifty pgbench expressions and as many parameters to format, bind and
-- parse, which made the driver cost about 8% of the server's CPU per New-Order. The
-- draws follow the same rules as pgbench's did (clause 2.1.6 NURand with the run's
-- constants, which the scripts pass); the transaction functions and their work are
-- unchanged.

-- A uniform integer of lo..hi, as pgbench's random(lo, hi). Written with random() alone,
-- not random(lo, hi), which only PostgreSQL 17 and later have. A one-expression SQL
-- function: the planner inlines it.
CREATE OR REPLACE FUNCTION tprocc_random(lo integer, hi integer)
RETURNS integer LANGUAGE sql VOLATILE AS $$
    SELECT lo + floor(random() * (hi - lo + 1))::integer
$$;

-- NURand(A, x, y) of clause 2.1.6 with the run-time constant C (inlined too).
CREATE OR REPLACE FUNCTION tprocc_nurand(a integer, x integer, y integer, c integer)
RETURNS integer LANGUAGE sql VOLATILE AS $$
    SELECT ((tprocc_random(0, a) | tprocc_random(x, y)) + c) % (y - x + 1) + x
$$;

-- True with probability pct percent.
CREATE OR REPLACE FUNCTION tprocc_chance(pct double precision)
RETURNS boolean LANGUAGE sql VOLATILE AS $$
    SELECT random() * 100 < pct
$$;

-- A warehouse of 1..p_warehouses other than p_w, uniformly (only called when there is one).
CREATE OR REPLACE FUNCTION tprocc_other_warehouse(p_w integer, p_warehouses integer)
RETURNS integer LANGUAGE sql VOLATILE AS $$
    SELECT (p_w + tprocc_random(0, p_warehouses - 2)) % p_warehouses + 1
$$;

-- New-Order's inputs (clause 2.4.1): p_d = 0 draws the district, else it is the
-- terminal's; 5..15 lines of NURand items, each supplied by another warehouse with
-- probability p_remote_pct, quantities 1..10; with p_rollback the last item is one that
-- does not exist (items are 1..100000), so the order rolls back (clause 2.4.1.4).
CREATE OR REPLACE FUNCTION tprocc_draw_new_order(
    p_w integer, p_d integer, p_rollback boolean, p_warehouses integer,
    p_c_id integer, p_c_ol_i_id integer, p_remote_pct double precision,
    OUT d_id integer, OUT c_id integer, OUT ol_cnt integer,
    OUT items integer[], OUT supply integer[], OUT qty integer[])
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    remote boolean := p_warehouses > 1 AND p_remote_pct > 0;
BEGIN
    d_id := CASE WHEN p_d = 0 THEN tprocc_random(1, 10) ELSE p_d END;
    c_id := tprocc_nurand(1023, 1, 3000, p_c_id);
    ol_cnt := tprocc_random(5, 15);
    FOR n IN 1..ol_cnt LOOP
        items[n] := CASE WHEN p_rollback AND n = ol_cnt THEN 100001
                         ELSE tprocc_nurand(8191, 1, 100000, p_c_ol_i_id) END;
        supply[n] := CASE WHEN remote AND tprocc_chance(p_remote_pct)
                          THEN tprocc_other_warehouse(p_w, p_warehouses) ELSE p_w END;
        qty[n] := tprocc_random(1, 10);
    END LOOP;
END
$$;

-- c_id of a Payment's or an Order-Status's customer: 0 (chosen by last name) with
-- probability p_by_name_pct, else NURand(1023, 1, 3000) (clauses 2.5.1.2, 2.6.1.2).
CREATE OR REPLACE FUNCTION tprocc_draw_c_id(p_c_id integer, p_by_name_pct double precision)
RETURNS integer LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN tprocc_chance(p_by_name_pct) THEN 0
                ELSE tprocc_nurand(1023, 1, 3000, p_c_id) END
$$;

-- Payment's inputs (clause 2.5.1): the district (p_d = 0 draws it); with probability
-- p_remote_pct a customer of another warehouse and a random district, else of the home
-- ones; the customer by name or number; 1.00 to 5,000.00 in cents.
CREATE OR REPLACE FUNCTION tprocc_draw_payment(
    p_w integer, p_d integer, p_warehouses integer, p_c_id integer, p_c_last integer,
    p_remote_pct double precision, p_by_name_pct double precision,
    OUT d_id integer, OUT c_w_id integer, OUT c_d_id integer, OUT c_id integer,
    OUT c_last integer, OUT amount_cents integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    d_id := CASE WHEN p_d = 0 THEN tprocc_random(1, 10) ELSE p_d END;
    IF p_warehouses > 1 AND p_remote_pct > 0 AND tprocc_chance(p_remote_pct) THEN
        c_w_id := tprocc_other_warehouse(p_w, p_warehouses);
        c_d_id := tprocc_random(1, 10);
    ELSE
        c_w_id := p_w;
        c_d_id := d_id;
    END IF;
    c_id := tprocc_draw_c_id(p_c_id, p_by_name_pct);
    c_last := tprocc_nurand(255, 0, 999, p_c_last);
    amount_cents := tprocc_random(100, 500000);
END
$$;

-- Order-Status's inputs (clause 2.6.1): the district (p_d = 0 draws it) and the customer.
CREATE OR REPLACE FUNCTION tprocc_draw_order_status(
    p_d integer, p_c_id integer, p_c_last integer, p_by_name_pct double precision,
    OUT d_id integer, OUT c_id integer, OUT c_last integer)
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_d = 0 THEN tprocc_random(1, 10) ELSE p_d END,
           tprocc_draw_c_id(p_c_id, p_by_name_pct), tprocc_nurand(255, 0, 999, p_c_last)
$$;

-- Position ceil(n/2) of the customers with that last name, sorted by first name
-- (clause 2.5.2.2); NULL when there is none.
CREATE OR REPLACE FUNCTION tprocc_customer_by_name(p_w integer, p_d integer, p_last varchar)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT (array_agg(c_id ORDER BY c_first))[(count(*)::integer + 1) / 2]
    FROM customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
$$;

-- Returns the new order's o_id, or 0 when an item does not exist: the caller must then
-- roll back (clause 2.4.2.3).
CREATE OR REPLACE FUNCTION tprocc_new_order(
    p_w integer, p_d integer, p_c integer, p_ol_cnt integer,
    p_items integer[], p_supply integer[], p_qty integer[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_w_tax    numeric;
    v_d_tax    numeric;
    v_o_id     integer;
    v_discount numeric;
    v_last     varchar;
    v_credit   char(2);
    v_price    numeric;
    v_name     varchar;
    v_i_data   varchar;
    v_dist     char(24);
    v_s_data   varchar;
    v_total    numeric := 0;
    v_local    integer;
    line       record;
BEGIN
    SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w;
    UPDATE district SET d_next_o_id = d_next_o_id + 1
        WHERE d_w_id = p_w AND d_id = p_d
        RETURNING d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id;
    SELECT c_discount, c_last, c_credit INTO v_discount, v_last, v_credit
        FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
    SELECT CASE WHEN bool_and(s = p_w) THEN 1 ELSE 0 END INTO v_local
        FROM unnest(p_supply[1:p_ol_cnt]) AS s;
    INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt,
                        o_all_local)
        VALUES (v_o_id, p_d, p_w, p_c, now(), NULL, p_ol_cnt, v_local);
    INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d, p_w);

    -- Stock rows are locked in (warehouse, item) order, whatever the order of the lines,
    -- so that two New-Orders never wait on each other in a cycle.
    FOR line IN
        SELECT l.item, l.supply, l.qty, l.num
        FROM unnest(p_items[1:p_ol_cnt], p_supply[1:p_ol_cnt], p_qty[1:p_ol_cnt])
             WITH ORDINALITY AS l(item, supply, qty, num)
        ORDER BY l.supply, l.item, l.num
    LOOP
        SELECT i_price, i_name, i_data INTO v_price, v_name, v_i_data
            FROM item WHERE i_id = line.item;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
        UPDATE stock
            SET s_quantity = CASE WHEN s_quantity - line.qty >= 10
                                  THEN s_quantity - line.qty
                                  ELSE s_quantity - line.qty + 91 END,
                s_ytd = s_ytd + line.qty,
                s_order_cnt = s_order_cnt + 1,
                s_remote_cnt = s_remote_cnt + CASE WHEN line.supply = p_w THEN 0 ELSE 1 END
            WHERE s_i_id = line.item AND s_w_id = line.supply
            RETURNING CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02
                               WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                               WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06
                               WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                               WHEN 9 THEN s_dist_09 ELSE s_dist_10 END,
                      s_data
            INTO v_dist, v_s_data;
        INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id,
                                ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)
            VALUES (v_o_id, p_d, p_w, line.num, line.item, line.supply, NULL, line.qty,
                    line.qty * v_price, v_dist);
        v_total := v_total + line.qty * v_price;
    END LOOP;
    -- The terminal would display this total; computing it keeps the work honest.
    v_total := v_total * (1 - v_discount) * (1 + v_w_tax + v_d_tax);
    RETURN v_o_id;
END
$$;

-- p_c = 0 selects the customer by last name number p_last (0..999).
CREATE OR REPLACE FUNCTION tprocc_payment(
    p_w integer, p_d integer, p_c_w integer, p_c_d integer, p_c integer, p_last integer,
    p_amount_cents integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_amount  numeric := p_amount_cents / 100.0;
    v_w_name  varchar;
    v_d_name  varchar;
    v_c       integer := p_c;
    v_credit  char(2);
BEGIN
    UPDATE warehouse SET w_ytd = w_ytd + v_amount WHERE w_id = p_w
        RETURNING w_name INTO v_w_name;
    UPDATE district SET d_ytd = d_ytd + v_amount WHERE d_w_id = p_w AND d_id = p_d
        RETURNING d_name INTO v_d_name;
    IF v_c = 0 THEN
        v_c := tprocc_customer_by_name(p_c_w, p_c_d, tprocc_last_name(p_last));
    END IF;
    UPDATE customer
        SET c_balance = c_balance - v_amount,
            c_ytd_payment = c_ytd_payment + v_amount,
            c_payment_cnt = c_payment_cnt + 1,
            c_data = CASE WHEN c_credit = 'BC'
                          THEN left(concat_ws(' ', c_id, c_d_id, c_w_id, p_d, p_w, v_amount,
                                              '|', c_data), 500)
                          ELSE c_data END
        WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c
        RETURNING c_credit INTO v_credit;
    INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
        VALUES (v_c, p_c_d, p_c_w, p_d, p_w, now(), v_amount, v_w_name || '    ' || v_d_name);
    RETURN v_c;
END
$$;

-- Returns the number of lines of the customer's last order.
CREATE OR REPLACE FUNCTION tprocc_order_status(p_w integer, p_d integer, p_c integer,
                                               p_last integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_c       integer := p_c;
    v_balance numeric;
    v_o_id    integer;
    v_lines   integer;
    v_qty     integer;
    v_amount  numeric;
    v_last_d  timestamp;
BEGIN
    IF v_c = 0 THEN
        v_c := tprocc_customer_by_name(p_w, p_d, tprocc_last_name(p_last));
    END IF;
    SELECT c_balance INTO v_balance
        FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
    SELECT o_id INTO v_o_id
        FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c
        ORDER BY o_id DESC LIMIT 1;
    -- Read the lines' columns, not only the key, as the terminal displays them.
    SELECT count(ol_i_id), sum(ol_quantity), sum(ol_amount), max(ol_delivery_d)
        INTO v_lines, v_qty, v_amount, v_last_d
        FROM order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o_id;
    RETURN v_lines;
END
$$;

-- Delivers the oldest undelivered order of each of the warehouse's ten districts;
-- returns how many were delivered.
CREATE OR REPLACE FUNCTION tprocc_delivery(p_w integer, p_carrier integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_o_id    integer;
    v_c       integer;
    v_amount  numeric;
    delivered integer := 0;
BEGIN
    FOR dist IN 1..10 LOOP
        -- FOR UPDATE under READ COMMITTED skips an order that a concurrent Delivery
        -- removed while we waited, and takes the next one.
        DELETE FROM new_order
            WHERE no_w_id = p_w AND no_d_id = dist
              AND no_o_id = (SELECT no_o_id FROM new_order
                             WHERE no_w_id = p_w AND no_d_id = dist
                             ORDER BY no_o_id LIMIT 1 FOR UPDATE)
            RETURNING no_o_id INTO v_o_id;
        CONTINUE WHEN NOT FOUND;
        UPDATE orders SET o_carrier_id = p_carrier
            WHERE o_w_id = p_w AND o_d_id = dist AND o_id = v_o_id
            RETURNING o_c_id INTO v_c;
        WITH delivered_lines AS (
            UPDATE order_line SET ol_delivery_d = now()
            WHERE ol_w_id = p_w AND ol_d_id = dist AND ol_o_id = v_o_id
            RETURNING ol_amount)
        SELECT sum(ol_amount) INTO v_amount FROM delivered_lines;
        UPDATE customer
            SET c_balance = c_balance + v_amount, c_delivery_cnt = c_delivery_cnt + 1
            WHERE c_w_id = p_w AND c_d_id = dist AND c_id = v_c;
        delivered := delivered + 1;
    END LOOP;
    RETURN delivered;
END
$$;

-- Distinct items of the district's last 20 orders whose stock is below the threshold.
CREATE OR REPLACE FUNCTION tprocc_stock_level(p_w integer, p_d integer, p_threshold integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_next integer;
    v_low  integer;
BEGIN
    SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
    SELECT count(DISTINCT s_i_id) INTO v_low
        FROM order_line JOIN stock ON s_w_id = p_w AND s_i_id = ol_i_id
        WHERE ol_w_id = p_w AND ol_d_id = p_d
          AND ol_o_id >= v_next - 20 AND ol_o_id < v_next
          AND s_quantity < p_threshold;
    RETURN v_low;
END
$$;
