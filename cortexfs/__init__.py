"""cortexfs: file-based long-term memory for AI agents.

Kept import-free so that `cortex --help` and the hook stay fast.
"""

__version__ = "0.1.0"
