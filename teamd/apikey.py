"""The API key (CONTRACT §8, §10): read once by `teamd run`, then held in memory only.

`/proc/PID/environ` shows the block laid out when a process was exec'd, and every process
forked from it carries a copy, whatever is later removed from `os.environ`. So the key must
never be in the environment block of any process of the product:

- `teamd run` takes the key from `ANTHROPIC_API_KEY` or from `api_key_file` — an absolute
  path to a file no other user can read, or the bare name of a systemd credential under
  `$CREDENTIALS_DIRECTORY` (`LoadCredential=`); a trailing newline is dropped.
- A `teamd` that found the variable in its environment re-executes itself without it
  (`os.execve`), passing the key to its new image over a pipe: only the descriptor's number
  is in the environment (`TEAMD_KEY_FD`).
- Each member gets the key from `teamd` over its go pipe, after the go byte
  (`teamd.processes`); `get` is where the model client takes it from.

`teamd` and every member also mark themselves non-dumpable (`teamd.proc.set_dumpable`), so a
tool running as the same user cannot read their memory either.

What is recorded and shown is only whether a key is set (`teamd.json`'s `api_key_set`, a
warning at `teamctl spawn` and in `teamctl status`); a member with no key and nowhere else to
send makes no call that could only be refused (`refusal`): its `last_error` says why.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from teamd.errors import BadInput

KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
#: what runs instead, offline: the scripted model with the scenario the package ships
OFFLINE = ("point teamd at the scripted model instead (ANTHROPIC_BASE_URL; "
           "`python -m teamd.scripted --scenario walkthrough`, see the README's \"Using it\")")
#: the number of the descriptor a re-executed `teamd` reads its key from (no secret in it)
FD_ENV = "TEAMD_KEY_FD"
CREDENTIALS_ENV = "CREDENTIALS_DIRECTORY"
#: no API key is this long; a file that is must be something else
MAX_KEY = 16384

_held: str | None = None


def get() -> str | None:
    """The key this process holds; else, outside `teamd` and its members (an agent loop run
    in a test or a benchmark), the environment's."""
    return _held if _held is not None else (os.environ.get(KEY_ENV) or None)


def held() -> str | None:
    """The key `teamd` or a member holds, None when it was given none."""
    return _held


def is_set(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this shell's environment names a key (what `teamctl` can tell without teamd)."""
    return bool(env.get(KEY_ENV))


def refusal(env: Mapping[str, str] = os.environ) -> str | None:
    """Why no model call is made, when none can succeed: no key held, and Claude's own API to
    send to (which answers 401); None otherwise (a key, the SDK's other credential
    ANTHROPIC_AUTH_TOKEN, or a base URL of one's own)."""
    if get() or env.get("ANTHROPIC_AUTH_TOKEN") or env.get(BASE_URL_ENV):
        return None
    return (f"model API: no {KEY_ENV} is set for teamd, so nothing reaches Claude (set it, or "
            f"api_key_file, where teamd runs, or {OFFLINE})")


def hold(key: str | None) -> None:
    global _held
    _held = key or None


def as_bytes() -> bytes:
    """What a member's go pipe carries after the go byte (nothing when there is no key)."""
    return (_held or "").encode()


def receive(fd: int) -> None:
    """Hold the key read from pipe `fd` to its end (at most `MAX_KEY` bytes); closes `fd`."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= MAX_KEY and (chunk := os.read(fd, MAX_KEY + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_KEY:
        raise BadInput(f"the API key handed over is over {MAX_KEY} bytes: not a key")
    hold(b"".join(chunks).decode("utf-8", "replace"))


def from_file(setting: str, environ: Mapping[str, str] | None = None) -> str:
    """The key in the file `api_key_file` names; BadInput naming the file when it cannot
    serve: missing, readable or writable by another user, empty, not text, too long."""
    env = os.environ if environ is None else environ
    if "/" not in setting:
        folder = env.get(CREDENTIALS_ENV)
        if not folder:
            raise BadInput(f"api_key_file {setting!r} names a systemd credential, but "
                           f"${CREDENTIALS_ENV} is not set (LoadCredential= in the unit); "
                           "give an absolute path otherwise")
        path, private = Path(folder) / setting, False  # systemd keeps that folder private
    elif not os.path.isabs(setting):
        raise BadInput(f"api_key_file {setting!r} must be an absolute path, or the bare name "
                       "of a systemd credential")
    else:
        path, private = Path(setting), True
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if private and (st.st_mode & 0o077 or st.st_uid != os.geteuid()):
                raise BadInput(f"api_key_file {path} is mode {stat.S_IMODE(st.st_mode):04o}, "
                               f"owner uid {st.st_uid}: another user could read it; make it "
                               f"yours and 0600 (chmod 600 {path})")
            raw = fh.read(MAX_KEY + 1)
    except OSError as exc:
        raise BadInput(f"api_key_file {path}: {exc.strerror or exc}") from None
    try:
        key = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise BadInput(f"api_key_file {path} is not text: not a key") from None
    if len(raw) > MAX_KEY:
        raise BadInput(f"api_key_file {path} is over {MAX_KEY} bytes: not a key")
    if not key.strip():
        raise BadInput(f"api_key_file {path} is empty")
    return key


def take(api_key_file: Callable[[], str]) -> None:
    """`teamd run`'s first step: hold the key, leaving it in no environment block.

    The image a re-execution started reads it from `TEAMD_KEY_FD`. Otherwise a key in
    `ANTHROPIC_API_KEY` wins over `api_key_file` (the environment overrides the file, §10),
    and its presence makes `teamd` re-execute itself without it (this never returns then),
    before anything else is loaded. `api_key_file`: the setting, read only when needed.
    """
    fd = os.environ.pop(FD_ENV, None)
    if fd is not None:
        try:
            receive(int(fd))
        except (OSError, ValueError):
            raise BadInput(f"{FD_ENV}={fd!r} is no pipe teamd handed itself; unset it") from None
    elif KEY_ENV in os.environ:  # even empty: the variable goes
        key = os.environ[KEY_ENV]
        if len(key.encode()) > MAX_KEY:
            raise BadInput(f"{KEY_ENV} is over {MAX_KEY} bytes: not a key")
        _reexec(key)
    if _held is None:  # no key in the environment (an empty one is none)
        setting = api_key_file()
        hold(from_file(setting) if setting else None)


def _reexec(key: str) -> None:
    """Run this same command again, its environment less the key, which goes over a pipe
    (it fits the pipe's buffer: written whole before the exec, read by the new image)."""
    r, w = os.pipe()
    try:
        data = key.encode()
        while data:
            data = data[os.write(w, data):]
    finally:
        os.close(w)
    os.set_inheritable(r, True)
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    env[FD_ENV] = str(r)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)
