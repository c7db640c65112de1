"""The PostToolUse hook: a Claude Code tool call's payload → access-log lines.

Runs after every Read, Grep and Bash call of the agent, so its whole-process time is the
agent's latency: standard library only, and for a Read or a Grep not even `json` or `re`
(their import, with enum and functools, costs as much again as the bare interpreter start on
a busy machine; the C scanner behind json.loads is used directly); a Bash call adds `re`
(its tokenizer is one regex pass: shlex was quadratic in a word's length) and a glob
`fnmatch`. Nothing from the rest of cortexfs but `accesslog` (with `wall` for the log
file) and, after a write, `autocommit`. No exception ever escapes, and nothing is printed.
A problem goes to one line of `$CORTEX_HOME/logs/hook.log`.

What counts as a read (SPEC §4): the atoms a Read names, the atoms a Grep result names
(once per call), the atoms a shell command reads (`cat`, `head`, `grep`, `sed -n`, …).
Only real atom files under the knowledge root count, after resolving `..` and links in the
folders above them; an atom file that is itself a link is not part of the store.

Whatever the payload, the work is bounded (the MAX_* constants): globs list at most
MAX_GLOB_DIRS folders, file lists and output lines are capped, and past MAX_SECONDS of
CPU the hook stops, logs the lines found by then and says where it stopped.
"""

from __future__ import annotations

import os
import stat
import sys
import time

from cortexfs import accesslog, layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterable, Iterator

# Bounds on the work one call may cost, whatever its payload (it runs after every tool call
# of the agent): past any of them the hook logs what it found so far and says where it stopped.
MAX_PAYLOAD = 64 * 1024 * 1024  # bytes of stdin we parse; more is logged and ignored
MAX_SECONDS = 0.5  # CPU seconds of work after parsing (the whole process stays within 1 s)
MAX_GLOB = 1000  # files one shell glob may expand to before we stop looking
MAX_GLOB_DIRS = 1000  # folders all the globs of one call may list (`/*/*/*/*/*/zz*`)
MAX_COMMAND = 1024 * 1024  # characters of a shell command we parse
MAX_NAMES = 20_000  # file names of a search result we look at
MAX_LINES = 200_000  # lines of a search's output we look at
HOOK_LOG_MAX = 1024 * 1024  # rotated to hook.log.1 beyond this

# Programs whose file operands the agent reads, with the options that take a value (so the
# value is not taken for a file). `SEARCHERS` print matches: a file operand counts when the
# search printed something, and a folder operand counts the atoms its output names.
_VALUE_OPTS: dict[str, frozenset[str]] = {
    "cat": frozenset(),
    "tac": frozenset({"-s", "--separator"}),
    "nl": frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"}),
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid",
                       "--max-unchanged-stats"}),
    "less": frozenset({"-p", "--pattern", "-x", "--tabs", "-y", "-b", "-h", "-j", "-k", "-o",
                       "-O", "-P", "-T", "-z", "-#"}),
    "bat": frozenset({"-l", "--language", "-r", "--line-range", "-H", "--highlight-line",
                      "--style", "--theme", "--tabs", "--wrap", "--terminal-width", "-m",
                      "--map-syntax", "--file-name", "--diff-context", "--color",
                      "--decorations", "--paging", "--pager", "--italic-text"}),
    "sed": frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length"}),
    "awk": frozenset({"-f", "--file", "-v", "--assign", "-F", "--field-separator", "-e",
                      "--source", "-i", "--include", "-l", "--load"}),
    "grep": frozenset({"-e", "--regexp", "-f", "--file", "-m", "--max-count", "-A", "-B", "-C",
                       "--after-context", "--before-context", "--context", "-d",
                       "--directories", "-D", "--devices", "--include", "--exclude",
                       "--exclude-dir", "--exclude-from", "--label", "--binary-files",
                       "--group-separator"}),
    "rg": frozenset({"-e", "--regexp", "-f", "--file", "-g", "--glob", "--iglob", "-t",
                     "--type", "-T", "--type-not", "-m", "--max-count", "-A", "-B", "-C",
                     "--after-context", "--before-context", "--context", "-M",
                     "--max-columns", "-j", "--threads", "-r", "--replace", "-d",
                     "--max-depth", "--pre", "--pre-glob", "--sort", "--sortr", "--color",
                     "--colors", "-E", "--encoding", "--type-add", "--ignore-file",
                     "--max-filesize", "--path-separator", "--context-separator",
                     "--field-match-separator", "--field-context-separator", "-V"}),
    "ag": frozenset({"-A", "-B", "-C", "-G", "--file-search-regex", "--ignore", "--depth",
                     "-m", "--max-count", "-g", "-p", "--path-to-ignore", "--pager"}),
}
_ALIASES = {"more": "less", "most": "less", "batcat": "bat", "gawk": "awk", "mawk": "awk",
            "nawk": "awk", "egrep": "grep", "fgrep": "grep", "zgrep": "grep", "ack": "ag"}
SEARCHERS = frozenset({"grep", "rg", "ag"})
_SCRIPTED = frozenset({"sed", "awk"})  # the first operand is a script, unless -e/-f gave one
# Words that run the command after them: `sudo cat x`, `time head x`, `timeout 5 cat x`.
_WRAPPERS: dict[str, frozenset[str]] = {  # each with its options that take a value
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}), "env": frozenset({"-u", "-C", "-S"}),
    "nice": frozenset({"-n"}), "ionice": frozenset({"-c", "-n", "-p"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}), "command": frozenset(), "builtin": frozenset(),
    "exec": frozenset({"-a"}), "time": frozenset({"-f", "-o"}), "nohup": frozenset(),
}
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "|&", ";;", "(", ")", "{", "}", "!"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>", "<<", "<<<", "<&", "<", "<<-"})
_SHELL_RE: dict[str, re.Pattern[str]] = {}  # compiled on the first Bash call only


def _shell_re(name: str) -> re.Pattern[str]:
    if not _SHELL_RE:
        import re

        _SHELL_RE["assignment"] = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
        _SHELL_RE["heredoc"] = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
        # one token of a shell line (shlex's posix rules, with its punctuation runs as the
        # shell's operators): a regex pass, where shlex costs a Python loop per character
        # and grows a long word quadratically (a 1 MB command: 38 s)
        _SHELL_RE["token"] = re.compile(r"""
            (?P<blank>[ \t\r\f\v]+)
          | (?P<sep>[\n`])
          | (?P<op>&>>|;;|&&|\|\||\|&|&>|>>|>\||>&|<>|<<<|<<-|<<|<&|[;&|()<>])
          | (?P<comment>\#[^\n]*)
          | (?P<word>(?:[^\s'"\\`;&|()<>]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+)
          | (?P<bad>.)
        """, re.VERBOSE | re.DOTALL)
        _SHELL_RE["quoted"] = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)""",
                                         re.DOTALL)
        _SHELL_RE["dq_escape"] = re.compile(r'\\([\\"])')
    return _SHELL_RE[name]


class Stopped(Exception):
    """A bound of the call's work (MAX_*) was reached: what was found so far is kept."""


class Budget:
    """What one call may still spend: CPU time (checked every 256 steps) and folders listed
    by globs. `note` keeps the first cap that cut a list short, for the log."""

    def __init__(self, seconds: float | None = None) -> None:
        self.until = time.process_time() + seconds if seconds is not None else float("inf")
        self.dirs = MAX_GLOB_DIRS
        self.steps = 0
        self.note = ""

    def step(self) -> None:
        self.steps += 1
        if not self.steps & 255 and time.process_time() > self.until:
            raise Stopped(f"stopped after {MAX_SECONDS:g} s of CPU")

    def capped(self, what: str) -> None:
        self.note = self.note or what


BUDGET = Budget()  # replaced by each record()


def _path_ends(line: str) -> Iterator[int]:
    """Where a file name ending in `.md` may end in a grep-like output line: before the ':'
    (a match) or '-' (a context line) that follows it, or at the end of the line."""
    start = 0
    while True:
        i = line.find(".md", start)
        if i < 0:
            return
        end = i + 3
        if end == len(line) or line[end] in ":-\0":
            yield end
        start = end


class Knowledge:
    """The knowledge root of one store and the atoms a path names inside it."""

    def __init__(self, home: str) -> None:
        self.root = os.path.realpath(os.path.join(home, layout.CONTEXT))
        self.prefix = self.root + os.sep
        self._cache: dict[str, tuple[str, str] | None] = {}
        self._dirs: dict[str, tuple[str, str] | None] = {}  # folder → (project, kind folder)

    def parts(self, path: str) -> list[str] | None:
        """The real path's components below the knowledge root; None when outside it (or
        when it cannot be a path: a NUL, a lone surrogate)."""
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return None
        if not real.startswith(self.prefix):
            return None
        return real[len(self.prefix):].split(os.sep)

    def atom(self, path: str) -> tuple[str, str] | None:
        """(project, file name) when `path` is an atom file of a project: named like one,
        in its kind's folder (after resolving `..` and links in the folders above it), and
        a regular file, not a link (cortexfs.wall). Costs one lstat, and one realpath per
        folder: a search result may name 600,000 files."""
        if path in self._cache:
            return self._cache[path]
        found = None
        folder, name = os.path.split(path)
        kind_folder = layout.atom_folder(name)
        if kind_folder is not None:
            if folder not in self._dirs:
                parts = self.parts(folder)
                self._dirs[folder] = (parts[1], parts[2]) if (
                    parts is not None and len(parts) == 3 and parts[0] == layout.PROJECTS
                    and layout.is_project_folder(parts[1])
                    and parts[2] in layout.ATOM_FOLDERS) else None
            where = self._dirs[folder]
            if where is not None and where[1] == kind_folder:
                try:
                    mode = os.lstat(os.path.join(self.root, layout.PROJECTS, *where, name)).st_mode
                except (OSError, ValueError):  # missing, or a NUL / lone surrogate in it
                    mode = 0
                if stat.S_ISREG(mode):
                    found = (where[0], name)
        if len(self._cache) < MAX_NAMES:
            self._cache[path] = found
        return found

    def atom_folder(self, path: str) -> str | None:
        """The project when `path` is an atom folder, or a file inside one."""
        parts = self.parts(path)
        if parts is None or len(parts) not in (3, 4) or parts[0] != layout.PROJECTS:
            return None
        if parts[2] in layout.ATOM_FOLDERS and layout.is_project_folder(parts[1]):
            return parts[1]
        return None

    def log_path(self, project: str) -> str:
        return os.path.join(self.root, layout.PROJECTS, project, layout.META, layout.ACCESS_LOG)


class Reads:
    """The atoms one tool call read, each once, in the order first seen."""

    def __init__(self, knowledge: Knowledge) -> None:
        self.knowledge = knowledge
        self.atoms: dict[tuple[str, str], None] = {}
        self.searched: dict[str, None] = {}  # projects whose atom folder a search covered

    def add(self, path: str, *bases: str) -> bool:
        """Count `path` (relative ones tried against each base in turn); True if an atom."""
        BUDGET.step()
        for candidate in _candidates(path, bases):
            found = self.knowledge.atom(candidate)
            if found is not None:
                self.atoms[found] = None
                return True
        return False

    def add_listing(self, text: str, *bases: str) -> int:
        """Count the atoms named at the start of grep-like output lines; how many lines did."""
        named = 0
        last = "\0"  # consecutive lines of one file share its prefix: skip them cheaply
        lines = text.splitlines()
        if len(lines) > MAX_LINES:
            BUDGET.capped(f"the first {MAX_LINES:,} of {len(lines):,} output lines looked at")
            del lines[MAX_LINES:]
        for line in lines:
            BUDGET.step()
            if line.startswith(last) and line[len(last):len(last) + 1] in (":", "-", ""):
                named += 1
                continue
            if ".md" not in line:
                continue
            for end in _path_ends(line):
                path = line[:end]
                if layout.atom_folder(path[path.rfind("/") + 1:]) and self.add(path, *bases):
                    named += 1
                    last = path
                    break
        return named

    def searched_in(self, path: str, *bases: str) -> None:
        """Note a search over `path`; it logs `_directory_search` if it names no atom."""
        for candidate in _candidates(path, bases):
            project = self.knowledge.atom_folder(candidate)
            if project is not None:
                self.searched[project] = None
                return

    def lines(self, tool: str, session: str) -> dict[str, list[bytes]]:
        """The log lines to append, per project log file."""
        out: dict[str, list[bytes]] = {}
        ts = accesslog.utc_now()
        entries = list(self.atoms) or [(p, accesslog.DIRECTORY_SEARCH) for p in self.searched]
        for project, name in entries:
            out.setdefault(self.knowledge.log_path(project), []).append(
                accesslog.format_line(name, tool, session, ts))
        return out


def _candidates(path: str, bases: Iterable[str]) -> Iterator[str]:
    path = os.path.expanduser(path) if path.startswith("~") else path
    if os.path.isabs(path):
        yield path
        return
    seen = set()
    for base in bases:
        if base and base not in seen:
            seen.add(base)
            yield os.path.join(base, path)


# --- the three tools -------------------------------------------------------------------------

def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _field(data: dict[str, object], key: str) -> str:
    """A string field of the payload: "" when missing, an error when of another type."""
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PayloadError(f"{key} is a {type(value).__name__}, not a string")
    return value


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def read_call(reads: Reads, tool_input: dict[str, object], response: object, cwd: str) -> None:
    path = _field(tool_input, "file_path")
    if not path:
        path = _str(_dict(_dict(response).get("file")).get("filePath"))
    if path:
        reads.add(path, cwd)


def grep_call(reads: Reads, tool_input: dict[str, object], response: object, cwd: str) -> None:
    target = _field(tool_input, "path") or cwd
    if not os.path.isabs(os.path.expanduser(target)):
        target = os.path.join(cwd, target)
    target = os.path.expanduser(target)
    single = not os.path.isdir(target)
    bases = (cwd, target if not single else os.path.dirname(target))
    filenames: list[str] = []
    content = ""
    if isinstance(response, dict):
        names = response.get("filenames")
        if isinstance(names, list):
            filenames = [n for n in names if isinstance(n, str)]
        content = _str(response.get("content")) or _str(response.get("output"))
        matched = bool(filenames) or bool(content.strip() and content.strip() != "0") \
            or any(isinstance(response.get(k), int) and response.get(k)
                   for k in ("numFiles", "numLines", "numMatches"))
    elif isinstance(response, str):  # older versions: the printed result
        content = response
        matched = bool(content.strip()) and not content.startswith("No ")
    elif isinstance(response, list):
        filenames = [n for n in response if isinstance(n, str)]
        matched = bool(filenames)
    else:
        matched = False
    if len(filenames) > MAX_NAMES:
        BUDGET.capped(f"the first {MAX_NAMES:,} of {len(filenames):,} file names looked at")
        del filenames[MAX_NAMES:]
    for name in filenames:
        reads.add(name, *bases)
    if content:
        reads.add_listing(content, *bases)
    if single and matched:
        reads.add(target)  # a one-file search prints lines without the file name
    reads.searched_in(target)


def bash_call(reads: Reads, tool_input: dict[str, object], response: object, cwd: str) -> None:
    command = _field(tool_input, "command")
    if not command:
        return
    if isinstance(response, dict):
        stdout: str | None = _str(response.get("stdout")) or _str(response.get("output"))
    elif isinstance(response, str):
        stdout = response
    else:
        stdout = None
    for program, operands, cwd_now in shell_reads(command, cwd):
        if program in SEARCHERS:
            _shell_search(reads, operands, cwd_now, stdout)
        else:
            for path in operands:
                reads.add(path, cwd_now)


def _shell_search(reads: Reads, operands: list[str], cwd: str, stdout: str | None) -> None:
    targets = [os.path.join(cwd, os.path.expanduser(p)) for p in operands] or [cwd]
    files = [t for t in targets if not os.path.isdir(t)]
    if stdout is None:  # no output to go by: the files it was given
        for target in files:
            reads.add(target)
    elif stdout.strip() and reads.add_listing(stdout, cwd) == 0 and len(targets) == 1 \
            and files:
        reads.add(files[0])  # one file: grep prints its lines without the name
    for target in targets:
        reads.searched_in(target)


# --- shell commands --------------------------------------------------------------------------

def shell_reads(command: str, cwd: str) -> Iterator[tuple[str, list[str], str]]:
    """(program, file operands, working folder) of each reading command in a shell line.

    Follows pipes, `&&`/`||`/`;` chains, subshells, `cd`, input redirections, `~`, `$HOME`
    and globs; does not run anything. Unparseable shell yields nothing.
    """
    if len(command) > MAX_COMMAND:
        BUDGET.capped(f"a shell command of {len(command):,} characters (over {MAX_COMMAND:,}) "
                      "was not parsed")
        return
    tokens = shell_tokens(_preprocess(command))
    if tokens is None:  # unbalanced quotes: the shell itself would have refused it
        return
    simple: list[str] = []
    for token in [*tokens, ";"]:
        BUDGET.step()
        if token in _SEPARATORS:
            if simple:
                result = _simple_command(simple, cwd)
                if isinstance(result, str):
                    cwd = result
                elif result is not None:
                    yield result
            simple = []
        else:
            simple.append(token)


def _preprocess(command: str) -> str:
    """Drop heredoc bodies and join continued lines."""
    command = command.replace("\\\n", "")
    if "<<" in command:
        kept: list[str] = []
        ending: list[str] = []
        for line in command.split("\n"):
            if ending:
                if line.strip() == ending[0]:
                    ending.pop(0)
                continue
            kept.append(line)
            ending = [m.group(2) for m in _shell_re("heredoc").finditer(line)
                      if "<<<" not in m.group(0)]
        command = "\n".join(kept)
    return command


def shell_tokens(command: str) -> list[str] | None:
    """The words (unquoted) and operators of a shell line, line ends and backquotes as `;`,
    comments dropped; None when a quote is not closed. Linear in the length."""
    tokens: list[str] = []
    for m in _shell_re("token").finditer(command):
        kind = m.lastgroup
        if kind == "word":
            word = m.group()
            tokens.append(_unquote(word) if "'" in word or '"' in word or "\\" in word
                          else word)
        elif kind == "op":
            tokens.append(m.group())
        elif kind == "sep":
            tokens.append(";")
        elif kind == "bad":
            return None
    return tokens


def _unquote(word: str) -> str:
    def part(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        if m.group(2) is not None:
            return _shell_re("dq_escape").sub(r"\1", m.group(2))
        return m.group(3)

    return _shell_re("quoted").sub(part, word)


def _simple_command(words: list[str], cwd: str) -> tuple[str, list[str], str] | str | None:
    """A reading command's (program, operands, cwd); the new folder for `cd`; else None."""
    args: list[str] = []
    inputs: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _REDIRECTS:
            if word == "<" and i + 1 < len(words):
                inputs.append(words[i + 1])
            i += 2
            continue
        if word.isdigit() and i + 1 < len(words) and words[i + 1] in _REDIRECTS:
            i += 1  # the fd number of `2>/dev/null`
            continue
        args.append(word)
        i += 1
    assignment = _shell_re("assignment")
    while args and (assignment.match(args[0]) or os.path.basename(args[0]) in _WRAPPERS):
        wrapper = os.path.basename(args.pop(0))
        takes_value = _WRAPPERS.get(wrapper, frozenset())
        while args and args[0].startswith("-"):
            if args.pop(0) in takes_value and args:
                args.pop(0)  # the wrapper's own options
        if wrapper == "timeout" and args:
            args.pop(0)  # the duration
    if not args:
        return None
    name = os.path.basename(args[0])
    if name == "cd":
        target = args[1] if len(args) > 1 else "~"
        if target == "-":
            return None
        return os.path.normpath(os.path.join(cwd, _expand(target)[0]))
    program = _ALIASES.get(name, name)
    value_opts = _VALUE_OPTS.get(program)
    if value_opts is None:
        return None
    operands = _operands(program, args[1:], value_opts)
    if operands is None:
        return None
    operands += inputs
    paths = [p for word in operands for p in _expand(word, cwd)]
    if not paths and program not in SEARCHERS:
        return None  # reads its standard input
    return program, paths, cwd


def _operands(program: str, args: list[str], value_opts: frozenset[str]) -> list[str] | None:
    """The file operands of `program args`; None when the call edits rather than reads, or
    is a search reading its standard input."""
    operands: list[str] = []
    script_given = recursive = options_done = False
    short_values = {o[1] for o in value_opts if len(o) == 2}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if options_done or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
            continue
        if arg == "--":
            options_done = True
            continue
        opt, has_value = arg.split("=", 1)[0], "=" in arg
        if opt.startswith("--"):
            letters, takes_value = "", opt in value_opts and not has_value
            script_given |= opt in ("--regexp", "--expression", "--file", "--source")
            recursive |= opt in ("--recursive", "--dereference-recursive")
            if program == "sed" and opt == "--in-place":
                return None
        else:
            # a cluster of one-letter options (`-rn`, `-A3`, `-n20`): the first letter that
            # takes a value takes the rest of the word, or the next word when nothing is left
            letters = ""
            takes_value = False
            for j, letter in enumerate(opt[1:], start=1):
                letters += letter
                if letter in short_values:
                    takes_value = j == len(opt) - 1 and not has_value
                    break
            script_given |= any(c in letters for c in "ef") and program != "ag"
            recursive |= any(c in letters for c in "rR")
            if program == "sed" and "i" in letters:
                return None  # sed -i edits the file in place
        if takes_value:
            i += 1
    if (program in SEARCHERS or program in _SCRIPTED) and not script_given and operands:
        operands.pop(0)  # the pattern or the script
    if program == "awk":
        operands = [a for a in operands if not _shell_re("assignment").match(a)]
    if program == "grep" and not operands and not recursive:
        return None  # grep with no file reads its standard input
    return operands


def _expand(word: str, cwd: str = "") -> list[str]:
    """The paths a shell word stands for: `~`, `$HOME`-style variables, then globs."""
    if word.startswith("~"):
        word = os.path.expanduser(word)
    if "$" in word:
        word = os.path.expandvars(word)
    if ("*" in word or "?" in word or "[" in word) and cwd:
        full = os.path.join(cwd, word)
        if not os.path.exists(full):
            return _glob(full) or [word]
    return [word]


def _glob(pattern: str) -> list[str]:
    """glob.glob(pattern), sorted, at most MAX_GLOB names, listing at most the folders the
    call's BUDGET has left (glob itself would walk the whole disk for `/*/*/*/*/*/zz*`)."""
    import fnmatch

    parts = pattern.split(os.sep)
    paths = [os.sep if pattern.startswith(os.sep) else ""]
    for i, part in enumerate(parts):
        if not part or part == ".":
            continue
        last = i == len(parts) - 1
        if not any(c in part for c in "*?["):
            paths = [os.path.join(p, part) for p in paths]
            continue
        found: list[str] = []
        for folder in paths:
            if BUDGET.dirs <= 0:
                BUDGET.capped(f"globs listed {MAX_GLOB_DIRS:,} folders")
                break
            BUDGET.dirs -= 1
            BUDGET.step()
            try:
                with os.scandir(folder or ".") as it:
                    names = [e.name for e in it if last or e.is_dir()]
            except (OSError, ValueError):
                continue
            if not part.startswith("."):
                names = [n for n in names if not n.startswith(".")]
            found += [os.path.join(folder, n) for n in sorted(fnmatch.filter(names, part))]
            if len(found) >= MAX_GLOB:
                break
        paths = found[:MAX_GLOB]
        if not paths:
            return []
    return [p for p in paths if os.path.lexists(p)]


# --- the process -----------------------------------------------------------------------------

TOOLS = {"Read": read_call, "Grep": grep_call, "Bash": bash_call}


class _ScanContext:
    """The settings json.JSONDecoder hands its C scanner, for plain json.loads."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity
    memo: dict[str, str] = {}


def loads(payload: bytes) -> object:
    """json.loads(payload) without importing json: the C scanner it would use, directly.

    Anything unusual (not UTF-8, no C accelerator, malformed) goes through json.loads itself,
    for the same result or the same error message.
    """
    try:
        from _json import make_scanner

        text = payload.decode("utf-8").strip(" \t\n\r")
        scan = make_scanner(_ScanContext())  # type: ignore[arg-type]  # duck-typed context
        value, end = scan(text, 0)
        if end == len(text):
            return value
    except (ImportError, UnicodeDecodeError, StopIteration, ValueError, TypeError,
            SystemError):  # (the scanner, used without json, on some malformed input)
        pass
    except RecursionError:
        raise ValueError("it nests deeper than a tool call does") from None
    import json

    try:
        return json.loads(payload)
    except RecursionError:
        raise ValueError("it nests deeper than a tool call does") from None


class PayloadError(Exception):
    """The payload is not a tool call this hook can read; the message says how."""


def record(payload: bytes, home: str) -> int:
    """Append the access lines for one hook payload; the number of lines written. Its work
    is bounded (MAX_*): BUDGET.note then says where it stopped."""
    global BUDGET
    BUDGET = Budget(MAX_SECONDS)
    if not payload.strip():
        raise PayloadError("empty payload on stdin")
    if len(payload) > MAX_PAYLOAD:
        raise PayloadError(f"payload of {len(payload)} bytes is over {MAX_PAYLOAD}; ignored")
    try:
        data = loads(payload)
    except ValueError as e:
        raise PayloadError(f"not a hook payload: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise PayloadError(f"payload is a JSON {type(data).__name__}, not an object")
    tool = data.get("tool_name")
    if not isinstance(tool, str) or tool not in TOOLS:
        return 0
    handler = TOOLS[tool]
    tool_input = data.get("tool_input")
    if not isinstance(tool_input, dict):
        raise PayloadError(f"{tool} payload has no tool_input object")
    cwd = _field(data, "cwd") or os.getcwd()
    response = data.get("tool_response", data.get("tool_output"))
    session = data.get("session_id")
    session = session if isinstance(session, str) else "" if session is None else str(session)
    knowledge = Knowledge(home)
    if os.path.islink(os.path.join(home, layout.CONTEXT)):
        raise PayloadError(f"{home}/context is a symbolic link: not a store cortex writes to")
    if not os.path.isdir(os.path.join(knowledge.root, layout.PROJECTS)):
        raise PayloadError(f"no cortex store at {home} (no context/projects/): run `cortex "
                           "init` or fix the --home of the installed hook")
    reads = Reads(knowledge)
    try:
        handler(reads, tool_input, response, cwd)
    except Stopped as e:  # log what was found by then
        BUDGET.note = f"{e}{'; ' + BUDGET.note if BUDGET.note else ''}"
    written = 0
    for log_path, lines in reads.lines(tool, session).items():
        accesslog.append(log_path, lines)
        written += len(lines)
    return written


def log_problem(home: str, message: str) -> None:
    """One line in $CORTEX_HOME/logs/hook.log, when that folder exists; never raises."""
    try:
        from cortexfs import wall

        logs = os.path.join(home, layout.LOGS)
        path = os.path.join(logs, layout.HOOK_LOG)
        if wall.reason(home, path) or not os.path.isdir(home):
            # a linked logs/ or hook.log is never written through, and a --home that names
            # no folder (a store moved or deleted, a typo) is never made
            return
        try:  # noqa: SIM105 - contextlib would be one more import on the hook's path
            os.mkdir(logs)
        except FileExistsError:
            pass
        try:
            if os.stat(path).st_size > HOOK_LOG_MAX:
                os.replace(path, path + ".1")
        except OSError:
            pass
        line = f"{accesslog.utc_now()} {' '.join(message.split())[:1000]}\n"
        accesslog.append(path, [line.encode("utf-8", "replace")])
    except Exception:  # noqa: S110 - the hook must never fail the agent's tool call
        pass


def home_from_args(argv: list[str]) -> str:
    """--home DIR (or --home=DIR), else $CORTEX_HOME, else ~/.cortex; made absolute."""
    home = ""
    for i, arg in enumerate(argv):
        if arg == "--home" and i + 1 < len(argv):
            home = argv[i + 1]
        elif arg.startswith("--home="):
            home = arg.split("=", 1)[1]
    return layout.resolve_home(home)


def main(argv: list[str] | None = None, stdin: bytes | None = None) -> int:
    """The hook process: read the payload, append the lines, hand off the commit. Always 0."""
    home = ""
    try:
        home = home_from_args(sys.argv[1:] if argv is None else argv)
        payload = sys.stdin.buffer.read() if stdin is None else stdin
        written = record(payload, home)
        if BUDGET.note:
            log_problem(home, f"{BUDGET.note} ({written} line(s) logged)")
        if written and os.environ.get("CORTEX_AUTOCOMMIT", "1") != "0":
            from cortexfs import autocommit

            autocommit.request(home)
    except PayloadError as e:
        log_problem(home or os.path.expanduser(layout.DEFAULT_HOME), str(e))
    except OSError as e:  # the file system refused: a full disk, a link (cortexfs.wall) …
        log_problem(home or os.path.expanduser(layout.DEFAULT_HOME), f"cannot log the read: {e}")
    except BaseException as e:  # fail open: the agent's tool call must never see an error
        log_problem(home or os.path.expanduser(layout.DEFAULT_HOME),
                    f"{type(e).__name__}: {e} (a bug; please report it)")
    return 0
