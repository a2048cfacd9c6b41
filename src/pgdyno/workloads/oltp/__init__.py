"""sysbench-style OLTP read-only and read-write (plugin.py), on sysbench's schema."""
