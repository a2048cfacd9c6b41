"""Workloads: the load pgdyno puts on a server (or on the host), one plugin per folder.

``base`` defines what a workload is (a base class with a default for every hook),
``registry`` finds them through the ``pgdyno.workloads`` entry-point group (pgdyno's own and
any installed package's), ``engine`` holds the load engines they share (pgbench, child
programs), ``dataset`` guards datasets pgdyno builds, ``parallel`` builds them over several
connections, ``sweeps`` reports and compares any workload's dataset-size sweeps.
"""
