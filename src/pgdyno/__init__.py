"""pgdyno: a dynamometer for PostgreSQL."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pgdyno")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"
