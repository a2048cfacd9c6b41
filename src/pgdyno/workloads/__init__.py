"""Workloads: what load pgdyno puts on the server (pgbench built-ins, user scripts, TPROC-C, ...)."""
