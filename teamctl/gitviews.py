"""What `diff`, `merge`, `remove` and `delete` say about git (CONTRACT.md section 13): work
not committed yet, a merge and the branch it may delete, the worktrees kept, and the merged
branches a person could prune. The git work itself is `teamd.worktrees`' and
`teamd.branches`'; this module only words it.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamctl import output
from teamd import branches, gitcmd, roster, worktrees
from teamd.files import Json
from teamd.layout import Workspace


def note_uncommitted(record: Mapping[str, Any]) -> None:
    """Say so when the member's worktree holds work not committed yet (not in the branch)."""
    if Path(record["path"]).is_dir():
        pending = worktrees.uncommitted(record["path"])
        if pending:
            print(f"note: {len(pending)} uncommitted file(s) in {record['path']} are not in "
                  "its branch yet (committed when its task is completed)", file=sys.stderr)


def merge(ws: Workspace, team: str, name: str, into: str | None, delete_branch: bool,
          as_json: bool) -> None:
    """`teamctl merge`: merge, then (`--delete-branch`) delete the merged branch, or mark it
    to go with the member's worktree; say which."""
    done = worktrees.merge(ws, team, name, into=into)
    record = gitcmd.worktree_of(roster.load(ws, team), name)
    note_uncommitted(record)
    if delete_branch:
        done["delete_branch"] = branches.delete_after_merge(ws, team, name)
    if as_json:
        output.emit_json(done)
        return
    if done["commit"] is None:
        print(f"{done['into']} already contains {done['branch']}: nothing to merge")
    else:
        print(f"merged {done['branch']} into {done['into']}: {done['commit']}")
    deleted = done.get("delete_branch")
    if deleted is None:
        return
    if deleted["deferred"]:
        print(f"{name} still uses {done['branch']} in {record['path']}: the branch is "
              f"deleted when that worktree goes (`teamctl remove {team} {name}`)")
    elif deleted["deleted"]:
        print(f"deleted branch {done['branch']}")
    else:
        print(f"kept branch {done['branch']}: {deleted['reason']}")


def report_release(report: Mapping[str, Any] | None) -> None:
    """One line for what a member's leaving did to its worktree, when it was not the plain
    removal: kept (and why), or removed with the branch `merge --delete-branch` marked."""
    if not report:
        return
    if not report["removed"] and report["reason"] != "already gone":
        print(f"kept worktree {report['path']} (branch {report['branch']}): "
              f"{report['reason']}")
    elif report.get("branch_deleted") is not None:
        print(f"deleted branch {report['branch']}" if report["branch_deleted"] else
              f"kept branch {report['branch']}: git branch -d refused (not merged)")


def report_after_delete(members: Sequence[Json]) -> None:
    """After a team is deleted: one line per worktree kept (whoever removed the team: this
    command or the supervisor; the archived journal has `worktree_kept` too), and one line
    per repository naming the merged branches that could be pruned."""
    for m in members:
        record = m["worktree"]
        if Path(record["path"]).exists():
            why = worktrees.keep_reason(record) or "kept"
            print(f"kept worktree {record['path']} (branch {record['branch']}): {why}")
    gone = [m for m in members if not Path(m["worktree"]["path"]).exists()]
    for repo, names in branches.prunable(gone).items():
        print(f"merged branches you can prune: git -C {shlex.quote(repo)} branch -d "
              f"{' '.join(names)}")
