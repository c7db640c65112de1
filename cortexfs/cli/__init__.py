"""The `cortex` command: a thin layer that parses arguments and calls the library."""
