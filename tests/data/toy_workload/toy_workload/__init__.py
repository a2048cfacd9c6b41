"""A toy pgdyno workload, installed as a package of its own (see plugin.py)."""
