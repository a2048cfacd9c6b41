"""Workloads: the load pgdyno puts on the server (pgbench built-ins, scripts, TPROC-C)."""
