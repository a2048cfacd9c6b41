"""Load engines shared by workloads: pgbench (C, the fastest honest driver) and child programs."""
