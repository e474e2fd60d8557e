"""The one-line warnings `teamctl spawn` gives on stderr, after the member is added: its
model deprecated, retired or unknown to the installed SDK (read from the SDK's source, never
imported), no API key for the supervisor, and no supervisor at all (CONTRACT.md §9, §12).
`no_key` is also the line `teamctl status` shows for a supervisor without a key."""

from __future__ import annotations

import sys

from teamd import apikey, deprecations, pidfile, settings
from teamd.errors import TeamdError
from teamd.files import Json
from teamd.layout import Workspace


def after_spawn(ws: Workspace, model: str | None) -> None:
    """Every warning that applies to a member just spawned, one line each."""
    supervisor = pidfile.running(ws)
    lines = [model_warning(ws, model), no_key(supervisor, ws)]
    if supervisor is None and not pidfile.supervised(ws):
        lines.append("note: no supervisor is running for this root; start one with "
                     "`teamd run`")
    for line in lines:
        if line:
            print(line, file=sys.stderr)


def model_warning(ws: Workspace, model: str | None) -> str | None:
    """The member's model (else the default) deprecated, retired or not one the installed
    SDK lists."""
    if not model:
        try:
            model = settings.load_file(ws).model
        except TeamdError:
            return None  # the member is added; a broken teamd.toml is teamd's to report
    found = deprecations.warning_for(model)
    return f"warning: {found}" if found else None


def no_key(supervisor: Json | None, ws: Workspace | None = None) -> str | None:
    """The running supervisor's `api_key_set` (from teamd.json), else this shell's
    environment and `api_key_file`."""
    if supervisor is not None:
        if supervisor.get("api_key_set") is not False:  # set, or a teamd that does not say
            return None
        who = f"the running teamd (pid {supervisor['pid']}) has no API key"
    elif apikey.is_set() or (ws is not None and _key_file(ws)):
        return None
    else:
        who = f"no {apikey.KEY_ENV} is set in this shell, nor api_key_file in teamd.toml"
    return f"warning: {who}: nothing reaches Claude; to run offline, {apikey.OFFLINE}"


def _key_file(ws: Workspace) -> str:
    try:
        return settings.load_file(ws).api_key_file
    except TeamdError:
        return ""
