"""pgdyno: a dynamometer for PostgreSQL."""

import os
from importlib.metadata import PackageNotFoundError, version

# One BLAS thread, set before numpy loads: OpenBLAS's extra threads spin while they wait for
# work, and during a run every cycle they burn is taken from the server and pgbench (a
# 1-D np.dot in the log reader kept one spinning at 0.17 cores). pgdyno's numeric work is
# small; it never needs a second BLAS thread.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

try:
    __version__ = version("pgdyno")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"
