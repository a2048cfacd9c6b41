"""The run loop: target up, dataset ready, pgbench iterations, run directory, report."""
