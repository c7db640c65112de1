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
    from cortexfs.cli.main import run

    run()


if __name__ == "__main__":
    main()
