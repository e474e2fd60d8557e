"""The workspace tools: `read_file`, `write_file`, `edit_file` and `bash` (CONTRACT.md §8).

Plain functions over a member's working directory. File tools are confined to that
directory: a path is resolved with every symlink followed and refused when it lands outside.
`bash` runs in its own process group with stdin closed, a timeout and an output cap; when it
returns (or times out) the whole group is killed, so no process outlives its tool call.
Every refusal raises `ToolError`, which `teamd.agent.tools.Toolbox` turns into an error
result for the model.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

READ_CAP = 50_000  # characters of a file shown to the model at once
BASH_CAP = 30_000  # characters of command output shown (head and tail kept)
# After the command ends the group is killed; output still in the pipe is read for at most
# this long (a grandchild that escaped into its own session could hold the pipe forever).
DRAIN_GRACE = 2.0
#: never in the environment of what the product starts (CONTRACT §8): the API credentials,
#: the descriptor number teamd re-executes with, the systemd notify socket (a `bash` that
#: wrote to it would speak for the supervisor), the store's URL and the test crash points;
#: and by prefix, the watchdog's variables and PostgreSQL's (PGPASSWORD, PGHOST, ...)
_DROPPED_ENV = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "TEAMD_KEY_FD",
                          "NOTIFY_SOCKET", "TEAMD_STORE"})
_DROPPED_PREFIXES = ("WATCHDOG_", "PG", "TEAMD_CRASH_")


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


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for what a member or teamd starts — `bash`, a hook, git: ours
    (`environ`), less what must never reach it (`_DROPPED_ENV`, `_DROPPED_PREFIXES`)."""
    return {k: v for k, v in (os.environ if environ is None else environ).items()
            if k not in _DROPPED_ENV and not k.startswith(_DROPPED_PREFIXES)}


class _Capture:
    """Output kept within a bound: the first `cap` bytes and the last `cap` bytes."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_len += len(data)
            while self.tail_len - len(self.tail[0]) >= self.cap:
                self.tail_len -= len(self.tail.popleft())

    def read_from(self, fd: int) -> bool:
        """Add what non-blocking `fd` has now; False at end of file (a tool's output and a
        hook's stderr are read alike)."""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.add(data)
        return True

    def text(self, cap: int) -> str:
        """Decoded output, at most about `cap` characters: head and tail, middle elided."""
        tail = b"".join(self.tail)
        dropped = self.total - len(self.head) - len(tail)
        whole = self.head.decode("utf-8", "replace")
        if not tail and len(whole) <= cap:
            return whole
        rest = tail.decode("utf-8", "replace")
        full = whole + rest
        if dropped == 0 and len(full) <= cap:
            return full
        half = cap // 2
        omitted = len(full) - 2 * half + dropped
        return (f"{full[:half]}\n[... {omitted} characters omitted ...]\n"
                f"{full[len(full) - half:]}")


@dataclass
class BashOutcome:
    output: str
    returncode: int | None
    timed_out: bool


def kill_group(pgid: int) -> None:
    """SIGKILL every process in group `pgid`; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_bash(command: str, cwd: Path, timeout: float, cap: int = BASH_CAP,
             environ: Mapping[str, str] | None = None, *,
             groups: set[int] | None = None) -> BashOutcome:
    """Run `bash -c command` in `cwd`, in a new session (its own process group), stdin from
    /dev/null, stdout and stderr merged. On exit or timeout the whole group is SIGKILLed.
    `groups` (the caller's: a member's `Toolbox.groups`) holds the group while it runs, so
    a SIGTERM handler can kill it before the process dies.

    The exit is watched through a pidfd so the group is killed while bash is still an
    unreaped zombie: its pid (the group id) cannot be reused before we signal it.
    """
    proc = subprocess.Popen(
        ["bash", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True, env=child_env(environ),
        close_fds=True)
    running = groups if groups is not None else set()
    running.add(proc.pid)  # start_new_session: the group id is bash's pid
    assert proc.stdout is not None
    out = _Capture(cap * 2)
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    pidfd: int | None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None  # no pidfd (old kernel): fall back to polling the exit below
    timed_out = exited = eof = False
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ, "out")
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            while not exited:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                wait = remaining if pidfd is not None else min(remaining, 0.05)
                for key, _ in sel.select(wait):
                    if key.data == "exit":
                        exited = True
                    elif not eof and not out.read_from(fd):
                        eof = True
                        sel.unregister(fd)
                if pidfd is None and proc.poll() is not None:
                    exited = True
            # Whatever is left of the group (background jobs, or everything on a timeout)
            # dies now: no process outlives its tool call.
            kill_group(proc.pid)
            if pidfd is not None:
                sel.unregister(pidfd)  # stays readable once bash exits: stop watching it
            if not eof:
                drain_until = time.monotonic() + DRAIN_GRACE
                while not eof and (left := drain_until - time.monotonic()) > 0:
                    for key, _ in sel.select(left):
                        if key.data == "out" and not out.read_from(fd):
                            eof = True
    finally:
        # Again, in case an exception cut the watch short; harmless otherwise (bash is not
        # reaped yet, so its pid, the group id, cannot have been reused).
        kill_group(proc.pid)
        if pidfd is not None:
            os.close(pidfd)
        proc.stdout.close()
        proc.wait()
        running.discard(proc.pid)
    return BashOutcome(out.text(cap), None if timed_out else proc.returncode, timed_out)

