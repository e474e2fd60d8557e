"""The workspace tools: `read_file`, `write_file`, `edit_file` and `bash` (CONTRACT.md §8).

Plain functions over a member's working directory. File tools are confined to that
directory: a path is resolved with every symlink followed and refused when it lands outside.
`bash` runs in its own process group with stdin closed, a timeout and an output cap; when it
returns (or times out) the whole group is killed, so no process outlives its tool call.
Every refusal raises `ToolError`, which `teamd.agent.tools.Toolbox` turns into an error
result for the model.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from teamd.pgroup import Ran, child_env, run

log = logging.getLogger(__name__)

READ_CAP = 50_000  # characters of a file shown to the model at once
BASH_CAP = 30_000  # characters of command output shown (head and tail kept)
class ToolError(Exception):
    """A refusal or failure reported to the model as an error result (one line)."""


# -- confinement -------------------------------------------------------------------------
def confine(cwd: Path, path: str) -> Path:
    """`path` (relative to `cwd`, or absolute inside it) resolved through every symlink.

    Refused when the resolved path is outside the resolved `cwd`: `../x`, an absolute path
    elsewhere, a symlink (file or parent folder) pointing out. The target need not exist:
    `realpath` resolves the existing part and appends the rest, so a new file is judged by
    the folder it would land in.
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    if "\x00" in path:
        raise ToolError("path must not contain NUL characters")
    root = Path(os.path.realpath(cwd))
    candidate = Path(path).expanduser() if path.startswith("~") else Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = Path(os.path.realpath(candidate))
    if resolved != root and root not in resolved.parents:
        raise ToolError(f"path {path!r} resolves to {str(resolved)!r}, outside the working "
                        f"directory {str(root)!r}; file tools only work inside it")
    return resolved


def shown(cwd: Path, resolved: Path) -> str:
    """A path as the model should see it: relative to the working directory."""
    try:
        return str(resolved.relative_to(os.path.realpath(cwd))) or "."
    except ValueError:
        return str(resolved)


# -- read, write, edit -------------------------------------------------------------------
def read_file(cwd: Path, path: str, limit: int | None = None, cap: int = READ_CAP) -> str:
    """The file's text: at most `limit` lines and `cap` characters, saying when cut."""
    target = confine(cwd, path)
    if target.is_dir():
        raise ToolError(f"{shown(cwd, target)} is a directory; use bash (ls) to list it")
    if not target.exists():
        raise ToolError(f"{shown(cwd, target)} does not exist")
    with open(target, "rb") as fh:
        head = fh.read(8192)
        if b"\x00" in head:
            size = os.fstat(fh.fileno()).st_size
            raise ToolError(f"{shown(cwd, target)} looks binary ({size} bytes); "
                            "inspect it with bash (file, xxd, strings)")
        fh.seek(0)
        text: list[str] = []
        used = 0
        cut = ""
        for lines, raw in enumerate(fh):
            if limit is not None and lines >= limit:
                cut = f"[stopped at the limit of {limit} lines; the file goes on]"
                break
            line = raw.decode("utf-8", errors="replace")
            if used + len(line) > cap:
                text.append(line[: cap - used])
                cut = (f"[truncated at {cap} characters in line {lines + 1}; read less with "
                       "`limit` or a range with bash, e.g. sed -n '200,400p' FILE]")
                break
            text.append(line)
            used += len(line)
    body = "".join(text)
    if not body and not cut:
        return f"({shown(cwd, target)} is empty)"
    if cut:
        return body + ("" if body.endswith("\n") else "\n") + cut
    return body


def _replace_file(target: Path, data: bytes) -> None:
    """Write `data` to `target` atomically (temp file beside it, fsync, os.replace).

    An existing file keeps its mode (a script stays executable); a new one gets the usual
    0666 less the umask, because this is the member's project, not a teamd file.
    """
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if mode is not None:
            os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise


#: checks a resolved path a file tool is about to write: ToolError to refuse it
Guard = Callable[[Path], None]


def write_file(cwd: Path, path: str, content: str, guard: Guard | None = None) -> str:
    target = confine(cwd, path)
    if guard is not None:
        guard(target)
    if target.is_dir():
        raise ToolError(f"{shown(cwd, target)} is a directory")
    existed = target.exists()
    # The parents are inside cwd (the resolved target is), so creating them cannot escape.
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8", errors="surrogatepass")
    _replace_file(target, data)
    verb = "replaced" if existed else "created"
    return f"wrote {len(data)} bytes to {shown(cwd, target)} ({verb})"


def edit_file(cwd: Path, path: str, old_text: str, new_text: str,
              guard: Guard | None = None) -> str:
    target = confine(cwd, path)
    if guard is not None:
        guard(target)
    if not target.is_file():
        raise ToolError(f"{shown(cwd, target)} does not exist or is not a regular file")
    if not old_text:
        raise ToolError("old_text must not be empty")
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown(cwd, target)} is not UTF-8 text; edit it with bash") from None
    count = text.count(old_text)
    if count == 0:
        raise ToolError(f"old_text not found in {shown(cwd, target)}; read the file and copy "
                        "the exact text, including whitespace")
    if count > 1:
        raise ToolError(f"old_text appears {count} times in {shown(cwd, target)}; give more "
                        "context so it matches exactly once")
    _replace_file(target, text.replace(old_text, new_text, 1).encode("utf-8"))
    return f"edited {shown(cwd, target)}: replaced 1 occurrence"


# -- bash --------------------------------------------------------------------------------
# Refused outright: a small list of commands no teammate has a reason to run, matched so
# that extra spaces, flag order and `sudo` do not get around them. Not a sandbox — the
# member's cwd confinement is for file tools; this only stops the obviously catastrophic.
_CMD_START = r"(?:^|[;&|(\n`{]|\$\()\s*(?:(?:sudo|exec|nohup|command|env|nice)\s+(?:-\S+\s+)*)*"
_DENYLIST: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\brm\s[^;&|\n]*?(?<=\s)[\"']?(?:/|/\*|~|~/|~/\*|\$HOME/?|\$\{HOME\}/?)"
                r"[\"']?(?=\s|$|[;&|)])"),
     "deletes the root or home directory"),
    (re.compile(r"\brm\s[^;&|\n]*--no-preserve-root"), "deletes the root directory"),
    (re.compile(r"\bmkfs(?:\.\w+)?(?=\s|$)"), "formats a filesystem"),
    (re.compile(r"\bdd\s[^;&|\n]*\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/)"),
     "overwrites a disk device"),
    (re.compile(r">\s*/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d)"),
     "overwrites a disk device"),
    (re.compile(r"([\w:.]+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}"), "is a fork bomb"),
    (re.compile(_CMD_START + r"(?:/usr)?(?:/s?bin/)?(?:shutdown|reboot|halt|poweroff)"
                r"(?=\s|$|[;&|)])"), "shuts the machine down"),
    (re.compile(_CMD_START + r"(?:/usr)?(?:/s?bin/)?(?:systemctl\s+(?:-\S+\s+)*)"
                r"(?:poweroff|reboot|halt|kexec)(?=\s|$|[;&|)])"), "shuts the machine down"),
    (re.compile(_CMD_START + r"(?:telinit|init)\s+[06](?=\s|$|[;&|)])"),
     "shuts the machine down"),
)


def check_command(command: str) -> None:
    """Raise ToolError if `command` matches the denylist."""
    flat = re.sub(r"[ \t]+", " ", command)
    for pattern, why in _DENYLIST:
        if pattern.search(flat):
            raise ToolError(f"refused: this command {why}, which a teammate never needs; "
                            "if it was meant to do something narrower, write it narrower")


def run_bash(command: str, cwd: Path, timeout: float, cap: int = BASH_CAP,
             environ: Mapping[str, str] | None = None, *,
             groups: set[int] | None = None) -> Ran:
    """The `bash` tool's run: `bash -c command` in `cwd` through the one process-group
    runner (`pgroup.run`): stdin from /dev/null, stdout and stderr merged, the whole
    group killed on exit or timeout, at most about `cap` characters kept."""
    return run(["bash", "-c", command], cwd, child_env(environ), timeout=timeout, cap=cap,
               keep=cap * 2, groups=groups)
