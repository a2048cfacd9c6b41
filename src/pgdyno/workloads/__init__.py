"""Workloads: the load pgdyno puts on a server (or on the host), one plugin per folder.

``base`` defines what a workload is, ``registry`` lists them, ``engine`` holds the load
engines they share (pgbench, child programs), ``dataset`` guards datasets pgdyno builds.
"""
