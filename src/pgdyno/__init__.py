"""pgdyno: a dynamometer for PostgreSQL."""

import os

# One BLAS thread, set before numpy loads: OpenBLAS's extra threads spin while they wait for
# work, and during a run every cycle they burn is taken from the server and pgbench (a
# 1-D np.dot in the log reader kept one spinning at 0.17 cores). pgdyno's numeric work is
# small; it never needs a second BLAS thread.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def __getattr__(name: str) -> str:
    """``pgdyno.__version__``, read from the installed metadata when first asked for: the
    metadata reader's imports take most of a tenth of a second, and the command line loads
    this package before its signal handling is in place (a Ctrl-C then would not be
    pgdyno's to handle)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("pgdyno")
    except PackageNotFoundError:  # running from a source tree without installation
        found = "0.0.0+source"
    globals()["__version__"] = found
    return found
