"""`python -m cortexfs` and the `cortex` command: Ctrl-C handling first, then the CLI."""

from cortexfs import interrupt

interrupt.install()  # before the CLI's imports: a Ctrl-C during them exits 130 quietly


def main() -> None:
    """Console-script entry point."""
    from cortexfs.cli.main import run

    run()


if __name__ == "__main__":
    main()
