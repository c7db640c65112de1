"""Store-wide derived files refreshed by every `cortex index regen`, after the indexes.

Each entry is "module:function"; the function takes the regeneration context that
`cortexfs.regen` builds (the store, the loaded atoms and access stats of every project)
plus `dry_run: bool`, and returns the paths it wrote (or, in a dry run, would write).
Imported lazily so a regeneration pays only for the generators it runs.
"""

from __future__ import annotations

GENERATORS: list[str] = [
    "cortexfs.hippocampus:regen",
    "cortexfs.overview:regen",
]
