"""The old name of :mod:`pgdyno.config.setting_specs`, kept only until the modules that
another piece of work is changing (runner/bench.py, targets/local.py, campaign/spec.py,
search/run.py) import the new one."""

from pgdyno.config.setting_specs import for_install, unquote

__all__ = ["for_install", "unquote"]
