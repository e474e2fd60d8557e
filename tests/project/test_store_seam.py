"""The store seam holds (issue 21): only the files store touches `.teams/` and `.tasks/`.

Outside the files store (`teamd/store/files/`) and the write primitives it is built on
(`teamd/files.py`, `teamd/linescan.py`, `teamd/watch.py`), no module of `teamd/` or
`teamctl/` names a file or folder of the store's layout, nor the store's paths, and a file
operation (open, replace, flock, glob, listdir, stat/exists, rename, unlink, a watcher) is
allowed only in the modules listed below, each for a file that is not the store's: a
member's own working tree, `.worktrees/`, `/proc`, `teamd.toml`, the key file, a member
process's own stderr log (CONTRACT §15 keeps it per host). The list cannot go stale: an
entry whose module no longer makes that call fails too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from teamd.store.api import Store

ROOT = Path(__file__).resolve().parents[2]
STORE = ("teamd/store/files/", "teamd/files.py", "teamd/removals.py", "teamd/linescan.py",
         "teamd/watch.py")

#: the store's own file names: a string outside the store that holds one builds a path there
LAYOUT_FILES = re.compile(
    r"(^|/)(\.teams|\.tasks|config\.json|events(\.\d+)?\.jsonl|[a-z0-9_-]*_inbox\.jsonl|"
    r"spend\.json|\.highwatermark|ratelimit\.json|teamd\.lock|teamd\.json|"
    r"permissions\.json|person_needed\.json|\.calls|\.archive)($|/)")
#: the store's folders, as the right side of a path join (`team_dir / "sessions"`)
LAYOUT_FOLDERS = {"members", "requests", "sessions", "transcripts", "removed", "claude"}

#: the store's paths, by the names `Paths` gives them
PATH_METHODS = {
    "teams_dir", "tasks_root", "team_dir", "config", "members_dir", "member_status", "spend",
    "inbox", "requests_dir", "request", "removed_dir", "sessions_dir", "session",
    "transcripts_dir", "events", "tasks_dir", "task", "highwatermark", "board_lock", "paged",
    "supervisor_lock", "supervisor_info", "archive_dir", "ratelimit_file", "calls_dir",
}

FILE_OPS = {"open", "flock", "lockf", "glob", "rglob", "listdir", "scandir", "iterdir",
            "stat", "lstat", "exists", "is_file", "is_dir", "rename", "unlink", "rmtree",
            "rmdir", "Watcher", "wait_for", "lock", "write_json", "read_json", "append_jsonl",
            "read_jsonl", "ensure_dir", "read_text", "read_bytes", "write_text",
            "write_bytes", "mkdir", "touch", "copytree", "copyfile", "copy2", "move"}
#: asking the store is no file operation: its methods, called on `….store`
STORE_METHODS = {name for name in dir(Store) if not name.startswith("_")}
#: names that are file operations only on these modules (`str.replace`, `list.remove` are not)
MODULE_OPS = {"replace": ("os",), "remove": ("os",)}

#: module → the file operations it may make, and on what (none of it the store's)
ALLOWED: dict[str, tuple[set[str], str]] = {
    "teamd/workdirs.py": ({"is_dir"}, "a member's working folder exists: a new one's, and "
                          "on the host asked to run it"),
    "teamd/agent/member.py": ({"is_dir"}, "the member's own working folder exists"),
    "teamd/agent/claude_code/process.py": ({"ensure_dir"}, "a Claude Code member's HOME, its "
                                           "own state (a host-local folder: CONTRACT §15)"),
    "teamd/agent/claude_code/transcript.py": ({"glob", "read_bytes"}, "Claude Code's own "
                                              "transcript, in that state folder"),
    "teamd/agent/tools_files.py": ({"exists", "is_dir", "is_file", "mkdir", "open",
                                    "read_bytes", "replace", "stat", "unlink"},
                                   "the file tools, on the member's working tree"),
    "teamd/crashpoints.py": ({"open", "read_bytes"}, "the crash log of TEAMD_CRASH_LOG (a "
                             "test's own file, CONTRACT §17)"),
    "teamd/deprecations.py": ({"read_text"}, "the installed SDK's sources (read, never run)"),
    "teamd/prices.py": ({"read_text"}, "the price table shipped with the package"),
    "teamd/scripted/scenario.py": ({"read_text"}, "a scenario file of the scripted model"),
    "teamd/apikey.py": ({"open"}, "the API key's file (`api_key_file`)"),
    "teamd/branches.py": ({"exists"}, "a member's worktree under .worktrees/"),
    "teamd/proc.py": ({"listdir", "open"}, "/proc/self, and the member's own stderr log"),
    "teamd/processes.py": ({"listdir", "ensure_dir"}, "/proc/self/fd: descriptors left "
                           "before a fork; the folder of the member's own stderr log"),
    "teamd/scripted/__main__.py": ({"exists", "glob", "is_file"},
                                   "the scripted model server's scenario files (a test tool)"),
    "teamd/scripted/record.py": ({"open"}, "the scripted model server's request log"),
    "teamd/settings.py": ({"exists", "is_file", "read_text", "stat"}, "teamd.toml"),
    "teamd/worktrees.py": ({"exists", "is_dir", "mkdir", "read_text", "rmdir", "rmtree",
                            "stat"},
                           "the repository and .worktrees/"),
    "teamctl/cli.py": ({"open"}, "/dev/null, for a stdout that went away"),
    "teamctl/stores.py": ({"mkdir"}, "the root `init` makes"),
    "teamd/store/setup.py": ({"exists", "mkdir", "read_text"},
                             "teamd.toml, and the root `init --store` makes"),
    "teamd/actions/transfer.py": ({"is_dir", "mkdir"}, "the folder a person names to "
                                  "`export` into (made) or `import` from: a files root of "
                                  "its own, its records reached through its own FilesStore"),
    "teamctl/config.py": ({"is_file"}, "teamd.toml"),
    "teamctl/demo.py": ({"ensure_dir", "exists", "is_dir", "open", "write_text"},
                        "the demo's own root, its work folder and teamd.log; its closing list "
                        "of the files a person can read with cat (the files store's)"),
    "teamctl/gitviews.py": ({"exists", "is_dir"}, "members' worktrees under .worktrees/"),
    "teamctl/params.py": ({"is_dir"}, "the root given exists"),
    "teamctl/web/app.py": ({"is_file", "iterdir", "read_bytes"},
                           "the web view's own static assets"),
    "teamctl/web/server.py": ({"open"}, "webbrowser.open: the page in a browser"),
}

#: module → the store's file names it may spell, and why it is not a path built there
NAMED: dict[str, tuple[set[str], str]] = {
    "teamd/layout.py": ({"'.teams'", "/ 'claude'"},
                        "a member's host-local files: its stderr log, a Claude Code member's "
                        "state (CONTRACT §15)"),
    "teamd/worktrees.py": ({"'.teams/'", "'.tasks/'"}, "the folders git is told to ignore"),
    "teamctl/demo.py": ({"'.teams/'", "'.tasks/'", "'config.json'", "'events.jsonl'",
                         "'user_inbox.jsonl'"},
                        "the demo's closing list of files a person can read with cat"),
}


def _sources() -> dict[str, Path]:
    found = {}
    for package in ("teamd", "teamctl"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(STORE) and rel not in STORE:
                found[rel] = path
    return found


def _receiver(node: ast.expr) -> list[str]:
    """The dotted names a call is made on (`ws.store.wait_for` → ["ws", "store"])."""
    names = []
    while isinstance(node, ast.Attribute):
        node = node.value
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.Name):
            names.append(node.id)
    return names[::-1]


def _ops(tree: ast.AST) -> set[str]:
    """The file operations a module calls (asking the store, `….store.x(…)`, is none)."""
    ops = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in FILE_OPS:
            ops.add(f.id)
        elif isinstance(f, ast.Attribute):
            on = _receiver(f)
            if on and on[-1] == "store" and f.attr in STORE_METHODS:
                continue
            if f.attr in FILE_OPS or (f.attr in MODULE_OPS and on[-1:] and
                                      on[-1] in MODULE_OPS[f.attr]):
                ops.add(f.attr)
    return ops


def _layout_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Strings naming the store's files (docstrings aside), and joins onto its folders."""
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and LAYOUT_FILES.search(node.value):
            found.append((node.lineno, repr(node.value)))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
                and isinstance(node.right, ast.Constant) and node.right.value in LAYOUT_FOLDERS:
            found.append((node.lineno, f"/ {node.right.value!r}"))
    return found


def _path_uses(tree: ast.AST) -> set[str]:
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in PATH_METHODS
            and isinstance(node.value, ast.Name | ast.Attribute)
            and (getattr(node.value, "id", None) in ("ws", "w", "workspace", "paths")
                 or getattr(node.value, "attr", None) in ("ws", "workspace", "paths"))}


def test_no_store_layout_outside_the_files_store() -> None:
    leaks = []
    for rel, path in _sources().items():
        tree = ast.parse(path.read_text())
        named = NAMED.get(rel, (set(), ""))[0]
        leaks += [f"{rel}:{n}: {what}" for n, what in _layout_strings(tree)
                  if what not in named]
        leaks += [f"{rel}: uses the store's path .{m}" for m in sorted(_path_uses(tree))]
    assert not leaks, "\n".join(leaks)


def test_file_operations_only_where_allowed() -> None:
    wrong, stale = [], []
    for rel, path in _sources().items():
        ops = _ops(ast.parse(path.read_text()))
        allowed = ALLOWED.get(rel, (set(), ""))[0]
        if ops - allowed:
            wrong.append(f"{rel}: {sorted(ops - allowed)}")
        if allowed - ops:
            stale.append(f"{rel}: {sorted(allowed - ops)} no longer made")
    assert not wrong, "file operations outside the store:\n" + "\n".join(wrong)
    assert not stale, "\n".join(stale)
