"""``pgdyno bench fio``: the storage baseline and PostgreSQL's own WAL sync test.

- ``jobs``: finding fio, the job set (sequential bandwidth, the queue-depth sweeps, the
  WAL-shaped fdatasync test) and each job's command line;
- ``places``: where the jobs run (directories that exist, or a raw device only with
  ``--destroy-data``) and the refusals that keep data safe;
- ``results``: every figure recomputed from fio's ``json+`` output and the kernel's
  counters read around each job;
- ``fsync``: ``pg_test_fsync`` from the target's binaries, parsed;
- ``options``: the workload's options, checked, and the places they name;
- ``runner``: the job set run on each place, the kernel's disk counters sampled during each
  job, SMART around the iteration;
- ``metrics``: an iteration's declared metrics and summary row; ``capacity``: the host's
  measured capacity from them;
- ``report``: the tables and plots; ``plugin``: the glue to the run loop.
"""
