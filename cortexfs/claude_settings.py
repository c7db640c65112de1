"""Claude Code's settings: adding and removing cortex's hooks and its MCP server, leaving
the rest alone.

Claude Code reads hooks from `~/.claude/settings.json` (user), `<project>/.claude/settings.json`
(project, usually committed) and `<project>/.claude/settings.local.json` (project, local — the
default here: cortex's hook commands hold this machine's absolute paths, see hook_command):

    {"hooks": {"PostToolUse": [{"matcher": "Read|Grep|Bash",
                                "hooks": [{"type": "command", "command": "…", "timeout": 5}]}]}}

cortex's entries are recognised by their command (the `memory-ref-tracker` script; `-m cortexfs
… brief`), so installing twice changes nothing, a stale entry (another interpreter, another
store) is replaced where it stands, and uninstalling removes only cortex's entries.

MCP servers are registered in `<project>/.mcp.json` (project scope, meant to be committed) or
in `~/.claude.json`'s top-level `mcpServers` (user scope), as Claude Code documents them:

    {"mcpServers": {"cortex": {"type": "stdio", "command": "…", "args": […], "env": {…}}}}

The project's entry is written to work on any machine: `cortex` from PATH, the store from
`${CORTEX_HOME:-…}` (Claude Code expands it; cortex expands `~`). The user's entry, in a file
of this machine only, names this interpreter and store absolutely, like the hooks.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortexfs.errors import InvalidInputError

HOOK_SCRIPT = "memory-ref-tracker"
POST_TOOL_USE = "PostToolUse"
SESSION_START = "SessionStart"
MATCHER = "Read|Grep|Bash"
HOOK_TIMEOUT = 5  # seconds; the hook takes milliseconds, this only bounds a hung filesystem
BRIEF_TIMEOUT = 30
_BRIEF = re.compile(r"-m\s+cortexfs\b.*\sbrief\b")
# Claude Code inlines a hook's output up to 10,000 characters and replaces longer output by a
# ~2,000-character preview (measured on Claude Code 2.x; its docs give no number): the brief
# printed at SessionStart stays under this, its truncation banner included.
BRIEF_CHARS = 9_000
MCP_NAME = "cortex"
MCP_FILE = ".mcp.json"


@dataclass(frozen=True)
class Change:
    """What installing or uninstalling does to one settings file."""

    path: Path
    before: str | None  # the file's text; None when it does not exist
    after: str | None  # the text to write; None when the file is to be left as it is

    @property
    def changed(self) -> bool:
        return self.after is not None and self.after != self.before

    def diff(self) -> str:
        """A unified diff of the change ('' when there is none)."""
        if not self.changed:
            return ""
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True), (self.after or "").splitlines(
                keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path))
        return "".join(lines)

    def apply(self) -> bool:
        """Write the new text (atomically); True when the file changed."""
        if not self.changed:
            return False
        from cortexfs.fsutil import atomic_write

        assert self.after is not None
        atomic_write(self.path, self.after)
        return True


# --- where and what --------------------------------------------------------------------------

def settings_path(project_dir: str | os.PathLike[str] | None = None, user: bool = False,
                  local: bool = True) -> Path:
    """The settings file for --user, or for a project (cwd by default): its
    settings.local.json (`local`, the default), else its shared settings.json."""
    if user and project_dir is not None:
        raise InvalidInputError("give either --user or --project-dir, not both")
    if user:
        return Path(os.path.expanduser("~")) / ".claude" / "settings.json"
    root = project_root(project_dir)
    return root / ".claude" / ("settings.local.json" if local else "settings.json")


def project_root(project_dir: str | os.PathLike[str] | None = None) -> Path:
    """The project folder (cwd by default); it must exist."""
    root = Path(project_dir if project_dir is not None else os.getcwd()).expanduser().absolute()
    if not root.is_dir():
        raise InvalidInputError(f"no folder {root}: give --project-dir the root of an "
                                "existing project (or use --user)")
    return root


def mcp_path(project_dir: str | os.PathLike[str] | None = None, user: bool = False) -> Path:
    """Where Claude Code reads MCP servers: the project's .mcp.json, or ~/.claude.json."""
    if user and project_dir is not None:
        raise InvalidInputError("give either --user or --project-dir, not both")
    if user:
        return Path(os.path.expanduser("~")) / ".claude.json"
    return project_root(project_dir) / MCP_FILE


def interpreter() -> str:
    """The absolute path of the Python running cortex, never a version-manager shim.

    A venv's `bin/python` is kept as it is (it is what finds the venv's packages); a shim
    (a script, e.g. pyenv's ~100 ms one) is replaced by the binary really running.
    """
    exe = os.path.abspath(sys.executable) if sys.executable else ""
    if exe and not _is_script(exe):
        return exe
    real = os.path.realpath("/proc/self/exe")
    return real if os.path.isfile(real) else exe or "python3"


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def hook_script() -> Path:
    """The hook script shipped with this cortexfs (hooks/ in a checkout, _hooks/ in a wheel)."""
    from cortexfs.templates import package_dir

    script = package_dir("hooks") / HOOK_SCRIPT
    if not script.is_file():
        raise InvalidInputError(f"cortexfs is installed without {script}: reinstall it")
    return script


def hook_command(home: str | os.PathLike[str]) -> str:
    """The shell command Claude Code runs after each Read, Grep and Bash call.

    Absolute interpreter, script and store, so it works whatever the agent's cwd, PATH and
    environment; `-I -S` skips site-packages (the script finds cortexfs beside itself).
    """
    return shlex.join([interpreter(), "-I", "-S", str(hook_script()), "--home",
                       str(Path(home).absolute())])


def brief_command(home: str | os.PathLike[str], project: str | None = None,
                  chars: int = BRIEF_CHARS) -> str:
    """The SessionStart command: print the session brief for the agent to start from, in at
    most `chars` characters (Claude Code cuts longer hook output; see BRIEF_CHARS)."""
    return shlex.join([interpreter(), "-P", "-m", "cortexfs", "--home",
                       str(Path(home).absolute()), "brief", *([project] if project else []),
                       "--max-chars", str(chars)])


def _brief_is_current(command: str, home: str | os.PathLike[str]) -> bool:
    """A SessionStart entry runs this interpreter's brief of this store with a size limit."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    prefix = shlex.split(brief_command(home))[:7]  # interpreter … --home HOME brief
    return argv[:7] == prefix and "--max-chars" in argv


def mcp_entry(home: str | os.PathLike[str], portable: bool) -> dict[str, Any]:
    """cortex's `mcpServers` entry: `portable` (a shared .mcp.json) runs `cortex` from PATH
    with the store from ${CORTEX_HOME:-…}; otherwise this interpreter and store, absolute."""
    home_path = Path(home).absolute()
    if portable:
        user_home = Path(os.path.expanduser("~")).absolute()
        shown = (f"~/{home_path.relative_to(user_home)}" if home_path.is_relative_to(user_home)
                 else str(home_path))
        return {"type": "stdio", "command": "cortex", "args": ["mcp"],
                "env": {"CORTEX_HOME": f"${{CORTEX_HOME:-{shown}}}"}}
    return {"type": "stdio", "command": interpreter(),
            "args": ["-P", "-m", "cortexfs", "--home", str(home_path), "mcp"], "env": {}}


def is_tracker(entry: object) -> bool:
    return isinstance(entry, dict) and HOOK_SCRIPT in str(entry.get("command", ""))


def is_brief(entry: object) -> bool:
    return isinstance(entry, dict) and bool(_BRIEF.search(str(entry.get("command", ""))))


# --- reading and editing ---------------------------------------------------------------------

def load(path: Path) -> tuple[str | None, dict[str, Any]]:
    """(text, settings) of a settings file; (None, {}) when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read {path} ({e}): fix its permissions or encoding, "
                                "then run the command again") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{path} is not valid JSON (line {e.lineno} column {e.colno}: "
                                f"{e.msg}): fix it (or move it away), then run the command "
                                "again") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path} holds a JSON {type(data).__name__}, not an object: "
                                "fix it (or move it away), then run the command again")
    _check_shape(path, data)
    return text, data


def _check_shape(path: Path, data: dict[str, Any]) -> None:
    hooks = data.get("hooks")
    if hooks is None:
        return
    if not isinstance(hooks, dict):
        raise InvalidInputError(f"{path}: \"hooks\" must be an object of event names: fix it, "
                                "then run the command again")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InvalidInputError(f"{path}: \"hooks.{event}\" must be a list of matcher "
                                    "groups: fix it, then run the command again")
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                raise InvalidInputError(f"{path}: \"hooks.{event}[{i}]\" must be an object "
                                        "with a \"hooks\" list: fix it, then run the command "
                                        "again")


def _dump(data: dict[str, Any], like: str | None) -> str:
    indent = 2
    if like:
        for line in like.splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped and len(stripped) < len(line):
                indent = len(line) - len(stripped)
                break
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def _drop(groups: list[Any], ours: Any) -> bool:
    """Take the hooks that `ours` accepts out of `groups`, and the groups that leaves empty
    (no other group); True when any hook went."""
    removed, emptied = False, []
    for group in groups:
        inner = group.get("hooks", [])
        if any(ours(h) for h in inner):
            removed = True
            group["hooks"] = [h for h in inner if not ours(h)]
            if not group["hooks"]:
                emptied.append(id(group))
    groups[:] = [g for g in groups if id(g) not in emptied]
    return removed


def _put(settings: dict[str, Any], event: str, matcher: str | None, entry: dict[str, Any],
         ours: Any) -> None:
    """Make `entry` cortex's only hook for `event`: in place of an old one, else appended."""
    groups: list[Any] = settings.setdefault("hooks", {}).setdefault(event, [])
    spot = next((g["hooks"] for g in groups if g.get("matcher") == matcher
                 and any(ours(h) for h in g.get("hooks", []))), None)
    if spot is not None:  # the first old entry of the first group for `matcher`
        spot[next(i for i, h in enumerate(spot) if ours(h))] = entry
    _drop(groups, lambda h: ours(h) and h is not entry)
    if spot is None:
        groups.append({**({"matcher": matcher} if matcher is not None else {}),
                       "hooks": [entry]})


def _remove(settings: dict[str, Any], ours: Any) -> None:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    removed = False
    for event in list(hooks):
        if _drop(hooks[event], ours):
            removed = True
            if not hooks[event]:
                del hooks[event]
    if removed and not hooks:
        del settings["hooks"]


def plan_install(path: Path, home: str | os.PathLike[str], session_start: bool = False,
                 brief_project: str | None = None, chars: int = BRIEF_CHARS) -> Change:
    """The change that installs the tracker (and the SessionStart brief) in `path`."""
    before, settings = load(path)
    new = copy.deepcopy(settings)
    _put(new, POST_TOOL_USE, MATCHER,
         {"type": "command", "command": hook_command(home), "timeout": HOOK_TIMEOUT},
         is_tracker)
    if session_start:
        _put(new, SESSION_START, None,
             {"type": "command", "command": brief_command(home, brief_project, chars),
              "timeout": BRIEF_TIMEOUT},
             is_brief)
    return Change(path, before, None if new == settings else _dump(new, before))


def _load_mcp(path: Path) -> tuple[str | None, dict[str, Any]]:
    before, data = load(path)
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInputError(f"{path}: \"mcpServers\" must be an object of server names: "
                                "fix it, then run the command again")
    return before, data


def plan_mcp(path: Path, home: str | os.PathLike[str], portable: bool) -> Change:
    """The change that registers cortex's MCP server in `path` (.mcp.json or
    ~/.claude.json), every other key kept."""
    before, data = _load_mcp(path)
    new = copy.deepcopy(data)
    new.setdefault("mcpServers", {})[MCP_NAME] = mcp_entry(home, portable)
    return Change(path, before, None if new == data else _dump(new, before))


def plan_mcp_removal(path: Path) -> Change:
    """The change that removes cortex's MCP server from `path` (and nothing else)."""
    before, data = _load_mcp(path)
    new = copy.deepcopy(data)
    (new.get("mcpServers") or {}).pop(MCP_NAME, None)
    return Change(path, before, None if new == data else _dump(new, before))


def mcp_installed(path: Path, home: str | os.PathLike[str]) -> Installed | None:
    """cortex's MCP server in `path`, marked current or stale; None when absent."""
    try:
        _, data = _load_mcp(path)
    except InvalidInputError:
        return None
    entry = (data.get("mcpServers") or {}).get(MCP_NAME)
    if not isinstance(entry, dict):
        return None
    portable = path.name == MCP_FILE
    command = shlex.join([str(entry.get("command", "")), *map(str, entry.get("args") or [])])
    return Installed(path, "mcpServers", command, entry == mcp_entry(home, portable))


def plan_uninstall(path: Path) -> Change:
    """The change that removes every cortex hook from `path` (and nothing else)."""
    before, settings = load(path)
    new = copy.deepcopy(settings)
    _remove(new, lambda h: is_tracker(h) or is_brief(h))
    return Change(path, before, None if new == settings else _dump(new, before))


@dataclass(frozen=True)
class Installed:
    """A cortex hook found in a settings file."""

    path: Path
    event: str
    command: str
    current: bool  # the command this cortex would install now


def installed(path: Path, home: str | os.PathLike[str]) -> list[Installed]:
    """cortex's hooks in `path`, each marked current or stale."""
    _, settings = load(path)
    found = []
    tracker = hook_command(home)
    for event, groups in (settings.get("hooks") or {}).items():
        for group in groups:
            for h in group.get("hooks", []):
                command = str(h.get("command", ""))
                if is_tracker(h):
                    current = event == POST_TOOL_USE and command == tracker
                elif is_brief(h):  # `… brief [PROJECT] --max-chars N`
                    current = event == SESSION_START and _brief_is_current(command, home)
                else:
                    continue
                found.append(Installed(path, event, command, current))
    return found
