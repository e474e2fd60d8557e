"""The name of this machine's host in a store shared by many machines (CONTRACT §15).

`TEAMD_HOST` when set (`teamd run --host NAME` sets it for itself and the members it
forks, so a member knows the host it runs on), else the machine's hostname. One word for
one thing: everything that asks "which host is this?" asks here.
"""

from __future__ import annotations

import os
import socket

ENV = "TEAMD_HOST"


def here() -> str:
    return os.environ.get(ENV) or socket.gethostname()
