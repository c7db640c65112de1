"""`python -m cortexfs` and the `cortex` command: Ctrl-C handling first, then the CLI.

A `cortex` process runs no BLAS work worth a second thread (recall's few matrix-vector
products take milliseconds), and OpenBLAS starts its thread pool when numpy is imported:
~40 ms of CPU per process, so the pool is one thread unless the user chose otherwise.

Python's cyclic collector is off while the CLI is imported (~70 collections of objects that
live as long as the process); `cortexfs.cli.main.run` turns it on again for the command.
"""

import gc
import os

from cortexfs import interrupt

gc.disable()  # until the command runs (see above)

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

interrupt.install()  # before the CLI's imports: a Ctrl-C during them exits 130 quietly


def main() -> None:
    """Console-script entry point."""
    try:
        from cortexfs.cli.main import run
    except RuntimeError as wrapped:
        # a signal's exit (see install) that landed in a class's __set_name__ during the
        # imports: Python 3.11 wraps it ("Error calling __set_name__"); exit as it meant to
        if isinstance(wrapped.__cause__, SystemExit):
            raise wrapped.__cause__ from None
        raise
    run()


if __name__ == "__main__":
    main()
