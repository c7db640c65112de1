"""Every name of a store: where it is, its folders and files, its lock files, the atom-id
grammar and the generated-block markers. Nothing else in cortexfs spells them.

Standard library only, and only `os`: the PostToolUse hook imports this module, and its
import path stays light (no `re`, no `pathlib`). Names are strings; callers join them onto
their own Path or str. The id grammar is given as data and as regular-expression sources
that callers compile where they need a pattern.

    $CORTEX_HOME/                     (resolve_home)
      context/                        CONTEXT: everything committed that agents read (the wall)
        CORTEX.md OVERVIEW.md HIPPOCAMPUS.md .hippocampus/
        decisions/ ideas/ scans/ user/   STORE_FOLDERS
        projects/<name>/              PROJECTS
          CORTEX.md STATUS.md ISSUES.md TASKS.yaml …   PROJECT_FILES
          experiments/ knowledge/ patterns/ decisions/   PROJECT_FOLDERS
            EXP-001.md … index.md     INDEX (generated)
          _meta/access-log.jsonl      META, ACCESS_LOG
        archive/<name>/               ARCHIVE: archived projects
      templates/                      TEMPLATES: per-store template overrides
      .cache/ .locks/ logs/           CACHE, LOCKS, LOGS: never committed
"""

from __future__ import annotations

import os

# --- where the store is ------------------------------------------------------------------------

HOME_ENV = "CORTEX_HOME"
DEFAULT_HOME = "~/.cortex"


def resolve_home(option: str | os.PathLike[str] | None = None) -> str:
    """The store's folder: the --home option, else $CORTEX_HOME, else ~/.cortex; absolute."""
    raw = option or os.environ.get(HOME_ENV) or DEFAULT_HOME
    return os.path.abspath(os.path.expanduser(os.fspath(raw)))


# --- folders and files -------------------------------------------------------------------------

CONTEXT = "context"
PROJECTS = "projects"  # context/projects/<name>/


def is_project_folder(name: str) -> bool:
    """Whether a folder of projects/ (or archive/) named `name` is a project: not hidden."""
    return bool(name) and not name.startswith((".", "_"))


ARCHIVE = "archive"  # context/archive/<name>/: archived projects
META = "_meta"  # a project's tool-written files
ACCESS_LOG = "access-log.jsonl"  # <project>/_meta/access-log.jsonl
TEMPLATES = "templates"
CACHE = ".cache"
LOCKS = ".locks"
LOGS = "logs"
USER = "user"  # context/user/USER.md
USER_MD = "USER.md"

# git paths (always "/"-separated) of the context and of the projects
CONTEXT_PREFIX = f"{CONTEXT}/"
PROJECTS_PATH = f"{CONTEXT}/{PROJECTS}"

INDEX = "index.md"  # one per atom folder, generated from the atoms' frontmatter
CORTEX_MD = "CORTEX.md"  # one per folder: hand-written purpose + a generated block
OVERVIEW_MD = "OVERVIEW.md"  # context/OVERVIEW.md: one line per project
HIPPOCAMPUS_MD = "HIPPOCAMPUS.md"  # context/HIPPOCAMPUS.md: the sparse memory index
HIPPOCAMPUS_DIR = ".hippocampus"  # its parts, when it is hierarchical
MISSION_MD = "mission.md"
ROADMAP_MD = "roadmap.md"
STATUS_MD = "STATUS.md"
ISSUES_MD = "ISSUES.md"
TASKS_FILE = "TASKS.yaml"
TASKS_ARCHIVE = "tasks-archive.md"
DECISIONS = "decisions"  # decision records, store-level and per project

STORE_FOLDERS = {  # folder under context/ → (title, purpose) of its CORTEX.md
    DECISIONS: ("Decisions", "System-level decision records, one file per decision: "
                "`NNNN-title.md` (Date, Status, Context, Alternatives, Decision, "
                "Consequences)."),
    "ideas": ("Ideas", "Incubating research directions, not yet projects."),
    "scans": ("Scans", "Knowledge scan reports, one file per date (`YYYY-MM-DD.md`)."),
    USER: ("User", "The user's preferences: `USER.md` (kept under 3 KB)."),
    PROJECTS: ("Projects", "One folder per project; each has its own `CORTEX.md`."),
}
PROJECT_FOLDERS = {  # folder of a project → (title, purpose) of its CORTEX.md
    "experiments": ("Experiments", "One file per experiment, `EXP-NNN.md`. "
                    "`index.md` is generated from their frontmatter."),
    "knowledge": ("Knowledge", "Atomic facts, heuristics and anti-patterns, `K-NNN.md`, "
                  "each citing its evidence. `index.md` is generated."),
    "patterns": ("Patterns", "Invariants across experiments, `PAT-NNN.md`, each citing "
                 "its source experiments. `index.md` is generated."),
    DECISIONS: ("Decisions", "Project decision records, `NNNN-title.md`."),
}
PROJECT_FILES = (MISSION_MD, ROADMAP_MD, STATUS_MD, ISSUES_MD, TASKS_FILE, TASKS_ARCHIVE)

# --- logs (under logs/) and lock files (under .locks/) -----------------------------------------

HOOK_LOG = "hook.log"
CRASH_LOG = "crash.log"  # an internal error's traceback
AUTOCOMMIT_LOG = "autocommit.log"
WATCH_LOG = "watch.log"
WATCH_PID = ".watch.pid"
PENDING_READS = "pending-reads"  # logs/pending-reads/<project>/: appends set aside (accesslog)

REGEN_LOCK = "regen.lock"
GIT_LOCK = "git.lock"
WATCH_LOCK = "watch.lock"
AUTOCOMMIT_LOCK = "autocommit.lock"
VIEW_LOCK = "view.lock"
LEXICAL_LOCK = "lexical.lock"  # beside recall's lexical segments, in the cache
EMBED_LOCK = "embed.lock"  # beside recall's embeddings, in the cache
ACCESS_LOGS_LOCK = "access-logs.lock"  # shared by appends, exclusive while logs are replaced


def ids_lock(project: str, prefix: str) -> str:
    """The lock held while a new id of `prefix` is taken in `project` (`cortex new`, and
    sync's renumbering: one name, so that the two exclude each other)."""
    return f"ids-{project}-{prefix}.lock"


def tasks_lock(project: str) -> str:
    return f"tasks-{project}.lock"


def decisions_lock(project: str | None) -> str:
    """The lock of a project's decision records (None: the store-level ones)."""
    return f"decisions-{project or '_store'}.lock"


# --- atom ids ----------------------------------------------------------------------------------

# The id prefix of each atom kind and the folder its files live in (cortexfs.atoms.KINDS
# adds the rest of each kind). An id is PREFIX-digits; only an experiment's takes a
# one-letter suffix (EXP-042b: a follow-up of EXP-042).
KIND_FOLDERS = {"EXP": "experiments", "K": "knowledge", "PAT": "patterns"}
ATOM_FOLDERS = frozenset(KIND_FOLDERS.values())
SUFFIXED = "EXP"
ATOM_EXT = ".md"


def id_pattern(prefix: str) -> str:
    """The regular-expression source of one kind's id: groups (number)(suffix)."""
    return rf"{prefix}-(\d+)" + ("([a-z])?" if prefix == SUFFIXED else "")


# Any atom id, no groups: EXP-\d+[a-z]?|K-\d+|PAT-\d+
ATOM_ID_PATTERN = "|".join(rf"{p}-\d+" + ("[a-z]?" if p == SUFFIXED else "")
                           for p in KIND_FOLDERS)
# A prefix in any case (the lenient form people type and misname files with): EXP|K|PAT
PREFIX_PATTERN = "|".join(KIND_FOLDERS)


def split_id(text: str) -> tuple[str, int, str] | None:
    """EXP-042b → ("EXP", 42, "b"); None when `text` is not exactly an atom id."""
    prefix, dash, number = text.partition("-")
    if not dash or prefix not in KIND_FOLDERS:
        return None
    suffix = ""
    if prefix == SUFFIXED and number[-1:].isascii() and number[-1:].islower():
        number, suffix = number[:-1], number[-1]
    if not number.isdecimal():  # (\d: any decimal digit, as the patterns match)
        return None
    return prefix, int(number), suffix


def atom_folder(name: str) -> str | None:
    """The folder an atom file name belongs in (`EXP-042b.md` → experiments), else None."""
    if not name.endswith(ATOM_EXT):
        return None
    parts = split_id(name[:-len(ATOM_EXT)])
    return KIND_FOLDERS[parts[0]] if parts is not None else None


# --- generated blocks --------------------------------------------------------------------------

# The generated part of every CORTEX.md lies between these markers; text around them is
# hand-written and never touched.
GENERATED_START = "<!-- cortex:generated:start — do not edit between these markers -->"
GENERATED_END = "<!-- cortex:generated:end -->"
EMPTY_BLOCK = f"{GENERATED_START}\n{GENERATED_END}"
