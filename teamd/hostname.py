"""The name of this machine's host in a store shared by many machines (CONTRACT §15).

`TEAMD_HOST` when set (`teamd run --host NAME` sets it for itself and the members it
forks, so a member knows the host it runs on), else the machine's hostname. One word for
one thing: everything that asks "which host is this?" asks here.
"""

from __future__ import annotations

import os
import re
import socket

ENV = "TEAMD_HOST"
#: what a host name may be (`teamd run --host`, `spawn --host`)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def here() -> str:
    return os.environ.get(ENV) or socket.gethostname()

#: why a store without hosts refuses what only hosts do
HOSTS_NEED_POSTGRES = ("hosts share a PostgreSQL store (--store URL); the files store is "
                       "one machine's")
