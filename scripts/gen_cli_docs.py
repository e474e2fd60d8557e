"""Write docs/cli.md from the real `teamctl --help` of every command (and `teamd run`).

    python scripts/gen_cli_docs.py          # rewrite docs/cli.md
    python scripts/gen_cli_docs.py --check  # exit 1 if docs/cli.md is out of date
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "cli.md"
COMMANDS = [[], ["init"], ["create"], ["spawn"], ["send"], ["broadcast"], ["inbox"],
            ["shutdown"], ["stop"], ["restart"], ["up"], ["down"], ["remove"], ["approve"],
            ["reject"], ["requests"], ["task"], ["task", "add"], ["task", "list"],
            ["task", "show"], ["task", "update"], ["budget"], ["prices"], ["status"], ["board"],
            ["logs"], ["transcript"], ["attach"], ["config"], ["delete"], ["diff"], ["merge"],
            ["demo"], ["web"], ["export"], ["import"]]


def help_of(argv: list[str]) -> str:
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
    out = subprocess.run([*argv, "--help"], capture_output=True, text=True, env=env,
                         check=True, cwd=REPO).stdout
    return "\n".join(line.rstrip() for line in out.strip().splitlines())


def render() -> str:
    parts = ["# Command reference", "",
             "Generated from the real `--help` output by `scripts/gen_cli_docs.py`; a test "
             "keeps it current.", ""]
    teamctl = [sys.executable, "-m", "teamctl.cli"]
    for cmd in COMMANDS:
        title = " ".join(["teamctl", *cmd])
        parts += [f"## {title}", "", "```", help_of(teamctl + cmd).replace(
            "Usage: python -m teamctl.cli", "Usage: teamctl"), "```", ""]
    parts += ["## teamd run", "", "```",
              help_of([sys.executable, "-m", "teamd", "run"]).replace(
                  "usage: __main__.py", "usage: teamd"), "```", ""]
    return "\n".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/cli.md is out of date: run python scripts/gen_cli_docs.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
