"""What every script in bench/ shares: where it works and writes, the order of its
conditions, its clocks and CPU counters, its line fits, and the one file it writes.

A script runs as ``python bench/NAME.py``, so this package is importable as ``harness``
(the script's own directory comes first on ``sys.path``)::

    from harness import ResultWriter, new_parser, run

    def build_parser():
        return new_parser(__doc__)

    def main(argv=None):
        args = build_parser().parse_args(argv)
        writer = ResultWriter("NAME", args)
        ...
        writer.write({"rows": rows})

    if __name__ == "__main__":
        run(main)
"""

from harness.cli import new_parser, run
from harness.fits import LineFit, line_fit, ratio_interval
from harness.order import abba, alternate, random_orders, rotate, round_orders
from harness.results import (
    RESULT_SCHEMA_VERSION,
    RESULTS_DIR,
    BenchResult,
    Environment,
    ResultWriter,
    environment,
    load_result,
)
from harness.timing import Stopwatch, children_cpu_s, process_tree_cpu_s, wait_for_children
from harness.workspace import BENCH_DIR, ROOT, SCRATCH_ROOT, kept_dir, require_free, scratch

__all__ = [
    "BENCH_DIR", "RESULTS_DIR", "RESULT_SCHEMA_VERSION", "ROOT", "SCRATCH_ROOT", "BenchResult",
    "Environment", "LineFit", "ResultWriter", "Stopwatch", "abba", "alternate",
    "children_cpu_s", "environment", "kept_dir", "line_fit", "load_result", "new_parser",
    "process_tree_cpu_s", "random_orders", "ratio_interval", "require_free", "rotate",
    "round_orders", "run", "scratch", "wait_for_children",
]
