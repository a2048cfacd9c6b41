-- The shared index of runs: one row per run of every host that writes to this database.
-- Written by `pgdyno bench` (and campaigns) with --results-db, or pushed later with
-- `pgdyno runs --sync-to`; read by `pgdyno runs --results-db`.
CREATE TABLE runs (
    host               text NOT NULL,      -- hostname of the machine the run was made on
    run_id             text NOT NULL,      -- CONTEXT/RUN under that host's results directory
    context            text NOT NULL,
    workload           text NOT NULL,
    status             text NOT NULL,      -- ok | failed | interrupted | running
    started_at         timestamptz NOT NULL,
    ended_at           timestamptz,
    config             text,
    clients            text,               -- client counts, comma-separated
    dataset            text,               -- "scale 10", "10 warehouses", ...
    headline_metric    text,               -- TPS, NOPM, events/s, ...
    headline           double precision,   -- its value at the best client count
    headline_unit      text,
    headline_direction text CHECK (headline_direction IN ('higher', 'lower')),
    p99_ms             double precision,
    verdict            text,               -- the bottleneck verdict at the peak
    pg_version         text,
    settings           jsonb,              -- the server's non-default settings
    recorded_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, host)
);
CREATE INDEX runs_started_at ON runs (started_at DESC);
CREATE INDEX runs_workload_started_at ON runs (workload, started_at DESC);
CREATE INDEX runs_context_started_at ON runs (context, started_at DESC);
