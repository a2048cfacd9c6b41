"""``pgdyno bench cpu``: the host's CPU baseline with sysbench cpu (plugin.py)."""
