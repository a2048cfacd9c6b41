-- Server-side data generation for TPROC-C: every row is made inside PostgreSQL by
-- set-returning SQL, so the load is bound by the server's insert path, not by the client.
-- Values follow TPC-C clause 4.3.3.1 (cardinalities, ranges, 10% "ORIGINAL" data,
-- 10% bad credit, NURand last names); random strings are cut from a per-call pool of
-- random alphanumerics, which is much cheaper than drawing every character. Money and
-- rates are whole cents (or ten-thousandths) times a numeric step: the same uniform
-- values as rounding a random float, without the float-to-numeric conversion per row.

-- The TPC-C last name of a number 0..999: one syllable per decimal digit.
CREATE OR REPLACE FUNCTION tprocc_last_name(n integer) RETURNS varchar
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ((ARRAY['BAR', 'OUGHT', 'ABLE', 'PRI', 'PRES', 'ESE', 'ANTI', 'CALLY', 'ATION',
                   'EING'])[n / 100 + 1]
         || (ARRAY['BAR', 'OUGHT', 'ABLE', 'PRI', 'PRES', 'ESE', 'ANTI', 'CALLY', 'ATION',
                   'EING'])[n / 10 % 10 + 1]
         || (ARRAY['BAR', 'OUGHT', 'ABLE', 'PRI', 'PRES', 'ESE', 'ANTI', 'CALLY', 'ATION',
                   'EING'])[n % 10 + 1])::varchar
$$;

-- A pool of random alphanumerics (as bytes) that tprocc_rstr cuts strings from.
CREATE OR REPLACE FUNCTION tprocc_pool() RETURNS bytea
LANGUAGE sql VOLATILE AS $$
    SELECT convert_to(string_agg(
               substr('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
                      1 + floor(random() * 62)::integer, 1), ''), 'UTF8')
    FROM generate_series(1, 1000)
$$;

-- A random string of lo..hi (<= 500) characters. The pool is bytea because substr() on
-- text in a UTF-8 database walks the string character by character, and this runs over a
-- million times per warehouse; encode(..., 'escape') returns alphanumerics unchanged.
-- A single SELECT, so the planner inlines it into the INSERTs.
CREATE OR REPLACE FUNCTION tprocc_rstr(pool bytea, lo integer, hi integer) RETURNS varchar
LANGUAGE sql VOLATILE AS $$
    SELECT encode(substr(pool, 1 + floor(random() * 500)::integer,
                         lo + floor(random() * (hi - lo + 1))::integer), 'escape')::varchar
$$;

-- The k-th 24-character slice of the pool after offset o (0 <= o < 500, k <= 9).
CREATE OR REPLACE FUNCTION tprocc_slice(pool bytea, o integer, k integer) RETURNS varchar
LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(substr(pool, 1 + o + 24 * k, 24), 'escape')::varchar
$$;

-- A random string of n digits.
CREATE OR REPLACE FUNCTION tprocc_digits(n integer) RETURNS varchar
LANGUAGE sql VOLATILE AS $$
    SELECT lpad(floor(random() * 10 ^ n)::bigint::text, n, '0')::varchar
$$;

-- Data fields of items and stock: 26..50 characters, 10% of them holding "ORIGINAL".
CREATE OR REPLACE FUNCTION tprocc_data(pool bytea) RETURNS varchar
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN random() < 0.1
                THEN tprocc_rstr(pool, 9, 21) || 'ORIGINAL' || tprocc_rstr(pool, 9, 21)
                ELSE tprocc_rstr(pool, 26, 50) END::varchar
$$;

CREATE OR REPLACE FUNCTION tprocc_load_items() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    pool bytea := tprocc_pool();
    n bigint;
BEGIN
    INSERT INTO item (i_id, i_im_id, i_name, i_price, i_data)
    SELECT i, 1 + floor(random() * 10000)::integer, tprocc_rstr(pool, 14, 24),
           (100 + floor(random() * 9901)::integer) * 0.01, tprocc_data(pool)
    FROM generate_series(1, 100000) AS i;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- One warehouse with everything that belongs to it; returns the number of rows made.
-- c_last_c is the load-time NURand constant for customer last names (clause 2.1.6.1).
CREATE OR REPLACE FUNCTION tprocc_load_warehouse(w integer, c_last_c integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    pool bytea := tprocc_pool();
    total bigint := 0;
    n bigint;
BEGIN
    INSERT INTO warehouse
    SELECT w, tprocc_rstr(pool, 6, 10), tprocc_rstr(pool, 10, 20), tprocc_rstr(pool, 10, 20),
           tprocc_rstr(pool, 10, 20), tprocc_rstr(pool, 2, 2), tprocc_digits(4) || '11111',
           floor(random() * 2001)::integer * 0.0001, 300000.00;
    total := total + 1;

    INSERT INTO district
    SELECT d, w, tprocc_rstr(pool, 6, 10), tprocc_rstr(pool, 10, 20), tprocc_rstr(pool, 10, 20),
           tprocc_rstr(pool, 10, 20), tprocc_rstr(pool, 2, 2), tprocc_digits(4) || '11111',
           floor(random() * 2001)::integer * 0.0001, 30000.00, 3001
    FROM generate_series(1, 10) AS d;
    total := total + 10;

    -- The ten s_dist strings of a row are consecutive slices of the pool from one random
    -- offset: as random as ten draws (the pool is), for one random() instead of twenty.
    INSERT INTO stock
    SELECT i, w, 10 + floor(random() * 91)::integer,
           tprocc_slice(pool, o, 0), tprocc_slice(pool, o, 1), tprocc_slice(pool, o, 2),
           tprocc_slice(pool, o, 3), tprocc_slice(pool, o, 4), tprocc_slice(pool, o, 5),
           tprocc_slice(pool, o, 6), tprocc_slice(pool, o, 7), tprocc_slice(pool, o, 8),
           tprocc_slice(pool, o, 9), 0, 0, 0, tprocc_data(pool)
    FROM (SELECT i, floor(random() * 500)::integer AS o
          FROM generate_series(1, 100000) AS i) AS s;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;

    -- Customers 1..1000 of a district carry every last name once; the rest are NURand.
    INSERT INTO customer
    SELECT c, d, w, tprocc_rstr(pool, 8, 16), 'OE',
           tprocc_last_name(CASE WHEN c <= 1000 THEN c - 1
               ELSE ((floor(random() * 256)::integer | floor(random() * 1000)::integer)
                     + c_last_c) % 1000 END),
           tprocc_rstr(pool, 10, 20), tprocc_rstr(pool, 10, 20), tprocc_rstr(pool, 10, 20),
           tprocc_rstr(pool, 2, 2), tprocc_digits(4) || '11111', tprocc_digits(16),
           now(), CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END, 50000.00,
           floor(random() * 5001)::integer * 0.0001, -10.00, 10.00, 1, 0,
           tprocc_rstr(pool, 300, 500)
    FROM generate_series(1, 10) AS d, generate_series(1, 3000) AS c;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;

    INSERT INTO history
    SELECT c, d, w, d, w, now(), 10.00, tprocc_rstr(pool, 12, 24)
    FROM generate_series(1, 10) AS d, generate_series(1, 3000) AS c;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;

    -- Orders get a random permutation of the district's customers; their lines are
    -- made from the inserted orders so that o_ol_cnt and the line count always agree.
    WITH o AS (
        INSERT INTO orders
        SELECT o_id, d, w, c, now(), CASE WHEN o_id < 2101 THEN 1 + floor(random() * 10) END,
               5 + floor(random() * 11)::integer, 1
        FROM (SELECT o_id, d, row_number() OVER (PARTITION BY d ORDER BY random()) AS c
              FROM generate_series(1, 10) AS d, generate_series(1, 3000) AS o_id) AS perm
        ORDER BY d, o_id
        RETURNING o_id, o_d_id, o_ol_cnt, o_entry_d
    )
    INSERT INTO order_line
    SELECT o.o_id, o.o_d_id, w, line, 1 + floor(random() * 100000)::integer, w,
           CASE WHEN o.o_id < 2101 THEN o.o_entry_d END, 5,
           CASE WHEN o.o_id < 2101 THEN 0 ELSE (1 + floor(random() * 999999)::integer) * 0.01 END,
           tprocc_rstr(pool, 24, 24)
    FROM o, generate_series(1, o.o_ol_cnt) AS line;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n + 30000;

    INSERT INTO new_order
    SELECT o_id, d, w FROM generate_series(1, 10) AS d, generate_series(2101, 3000) AS o_id;
    total := total + 9000;
    RETURN total;
END
$$;
