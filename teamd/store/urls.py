"""Store URLs (CONTRACT §15): which store a root uses, checked and shown without a password.

`files` (the default: `.teams/` and `.tasks/` under the root) or a PostgreSQL URL
(`postgresql://…`, any libpq URI, Unix sockets included). A password given in the URL is
used for connecting only: every URL the product shows goes through `mask`.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from teamd.errors import BadInput

FILES = "files"
SCHEMES = ("postgresql", "postgres")


def is_postgres(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SCHEMES and "://" in url


def mask(url: str) -> str:
    """`url` as people are shown it: the password, if any, replaced by `***` (in a URL
    of any scheme: a mistyped one is shown in its error)."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("://", 1)[0] + "://***"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def check(url: str) -> str:
    """`url` if it names a store this product has, else BadInput in one line (masked)."""
    if url == FILES:
        return url
    if not is_postgres(url):
        raise BadInput(f"unknown store {mask(url)!r}: use `files` or a postgresql:// URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is no number
    except ValueError as exc:
        raise BadInput(f"malformed store URL {mask(url)!r}: {exc}") from None
    return url


def without_password(url: str) -> str:
    """`url` with no password (what `teamctl init --store` writes into teamd.toml: the
    password comes from the URL given at run time, PGPASSWORD or ~/.pgpass)."""
    if not is_postgres(url):
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}"))


def command_line_warning(url: str, option: str = "--store") -> str | None:
    """The one line to warn with when `url`, given on the command line, holds a password
    (every user of the machine sees it in `ps`); None when it holds none."""
    if not is_postgres(url) or urlsplit(url).password is None:
        return None
    return (f"warning: the password in {option} {mask(url)} shows in `ps` to every user of "
            f"this machine; put it in PGPASSWORD or ~/.pgpass instead")
