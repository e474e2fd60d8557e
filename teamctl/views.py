"""How `teamctl status` and `teamctl board` read to a person, once or live (`--watch`).

The text is built by `output` (plain, aligned on what shows, painted only for a terminal
without NO_COLOR). `--watch` redraws it in place with rich's Live, imported only there;
where escape codes are not wanted (NO_COLOR, or not a terminal) it prints each new frame
below the last instead, like `top -b`.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

from teamctl import advice, output
from teamd import prices, roster, runtimes
from teamd.files import Json
from teamd.store import Feed, Kind

log = logging.getLogger(__name__)


def terminal_width() -> int | None:
    """The terminal's width, or None when stdout is not one (a pipe gets whole lines)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


# -- status ------------------------------------------------------------------------------
def notes(m: Json) -> str:
    """The markers of a member: a closed plan gate, and each request still pending."""
    out = [m["waiting_for"]] if m.get("waiting_for") else []
    if m.get("plan_gate") == "closed":
        out.append("plan gate closed")
    for r in m.get("pending_requests") or []:
        if r["kind"] == "shutdown" and r["recipient"] == m["name"]:
            out.append(f"shutdown asked {r['request_id']}")
        elif r["kind"] == "plan_approval":
            out.append(f"plan pending {r['request_id']}")
        elif not (r["kind"] == "permission" and m.get("waiting_for")):
            out.append(f"{r['kind']} pending {r['request_id']}")
    return ", ".join(out)


def member_row(m: Json) -> tuple[Any, ...]:
    stale = not m["live"] and m["status"] in roster.RUNNING_STATUSES
    status = (m["status"] + ("?" if stale else ""), output.STATUS_COLORS.get(m["status"]))
    u = m.get("usage") or {}
    tokens_in = prices.input_tokens(u)
    cpu = m.get("cpu_percent")
    return ((m["name"], m.get("color")), status,
            f"#{m['current_task']}" if m.get("current_task") else "-",
            output.duration(m.get("uptime")),
            m["pid"] if m["live"] else "-",
            f"{cpu:.1f}" if cpu is not None else "-",
            output.human_bytes(m.get("pss")),
            f"{output.human_count(tokens_in)}/{output.human_count(u.get('output_tokens'))}",
            output.dollars(u.get("cost_usd")) + (
                f"/{output.dollars(m['budget_usd'])}" if m.get("budget_usd") else ""),
            m.get("restarts", 0),
            (notes(m), "yellow"),
            (m.get("last_error") or "", "red"))


def branch_cell(m: Json) -> str:
    """A worktree member's branch and its commits not merged yet: `teamd/t/n +2`."""
    if not m.get("branch"):
        return "-"
    return f"{m['branch']} +{m['ahead']}" if m.get("ahead") is not None else m["branch"]


HEADERS = ("NAME", "STATUS", "TASK", "UPTIME", "PID", "CPU%", "PSS", "TOKENS", "COST",
           "RESTARTS", "NOTES", "LAST ERROR")


def render_status(doc: Json, fit: int | None = None) -> str:
    sup = doc["supervisor"]
    if sup:
        cpu = sup.get("cpu_percent")
        lines = [f"supervisor: pid {sup['pid']}, up {output.duration(sup.get('uptime'))} "
                 f"(since {output.when(sup.get('started_at'))}), CPU "
                 f"{cpu or 0:.1f}%, PSS {output.human_bytes(sup.get('pss'))}"]
        lines += filter(None, [advice.no_key(sup)])  # teamd.json's api_key_set
    else:
        lines = [f"supervisor: none running for {doc['root']} (start one with `teamd run`); "
                 "statuses below may be stale"]
    for t in doc["teams"]:
        c = t["tasks"]
        lines.append("")
        spend = output.dollars(t.get("spent_usd") or 0.0)
        if t.get("budget_usd"):
            spend += f" of {output.dollars(t['budget_usd'])}"
        lines.append(f"team {output.paint(t['name'], 'bold')} ({t['state']}) tasks: "
                     f"{c['pending']} pending, {c['in_progress']} in progress, "
                     f"{c['completed']} completed; spent {spend}")
        trouble = t.get("supervisor_error")
        if trouble:
            lines.append(output.paint(f"  teamd error since {output.when(trouble['ts'])}: "
                                      f"{trouble['reason']}", "red"))
        rows = [member_row(m) for m in t["members"]]
        headers: tuple[str, ...] = HEADERS
        if any(m.get("branch") for m in t["members"]):
            # a team working in git worktrees: each member's branch, commits not yet merged
            headers = (*HEADERS[:3], "BRANCH", *HEADERS[3:])
            rows = [(*r[:3], branch_cell(m), *r[3:])
                    for r, m in zip(rows, t["members"], strict=True)]
        if any(m.get("runtime", runtimes.TEAMD) != runtimes.TEAMD for m in t["members"]):
            # a team with Claude Code members: which agent each runs (CONTRACT §14)
            headers = (headers[0], "RUNTIME", *headers[1:])
            rows = [(r[0], m.get("runtime") or runtimes.TEAMD, *r[1:])
                    for r, m in zip(rows, t["members"], strict=True)]
        if "host" in (t["members"] or [{}])[0]:
            # a team across machines: the host each member is placed on (CONTRACT §15)
            headers = (headers[0], "HOST", *headers[1:])
            rows = [(r[0], m.get("host") or "-", *r[1:])
                    for r, m in zip(rows, t["members"], strict=True)]
        lines.append(output.table(headers, rows, fit=fit, flexible=2) if rows else
                     "  no members")
    for bad in doc.get("unreadable") or []:
        lines += ["", output.paint(f"team {bad['name']}: cannot be read: {bad['error']}", "red")]
    if not doc["teams"] and not doc.get("unreadable"):
        lines.append("no teams (create one with `teamctl create TEAM`)")
    return "\n".join(lines)


# -- board -------------------------------------------------------------------------------
COLUMNS = (("pending", "PENDING"), ("in_progress", "IN PROGRESS"), ("completed", "COMPLETED"))
GAP = 3


def card(task: Json, colors: dict[str, str], cols: int) -> list[tuple[str, str | None]]:
    """A task as a few lines of at most `cols` columns: id and subject, owner, links."""
    done = task["status"] == "completed"
    lines: list[tuple[str, str | None]] = [
        (output.short(f"#{task['id']} {task['subject']}", cols), "dim" if done else "bold")]
    def detail(text: str, color: str | None) -> None:
        lines.append(("  " + output.short(text, cols - 2), color))

    owner = task.get("owner")
    if owner:
        detail(f"@{owner}", colors.get(owner))
    elif task["status"] == "pending":
        detail("ready, unowned" if task.get("claimable") else "unowned", None)
    if task.get("waiting_on"):
        detail("blocked by " + " ".join(f"#{b}" for b in task["waiting_on"]), "red")
    if task.get("blocks") and not done:
        detail("blocks " + " ".join(f"#{b}" for b in task["blocks"]), "yellow")
    return lines


def render_board(doc: Json, colors: dict[str, str], fit: int | None = None) -> str:
    """The board as three columns side by side, a card per task."""
    total = fit or 120
    cols = max(16, (total - GAP * (len(COLUMNS) - 1)) // len(COLUMNS))
    stacks: list[list[tuple[str, str | None]]] = []
    for key, title in COLUMNS:
        tasks = doc["columns"].get(key, [])
        stack: list[tuple[str, str | None]] = [(f"{title} ({len(tasks)})", "bold"),
                                               ("-" * min(cols, 24), None)]
        for i, task in enumerate(tasks):
            if i:
                stack.append(("", None))
            stack.extend(card(task, colors, cols))
        if not tasks:
            stack.append(("-", "dim"))
        stacks.append(stack)
    height = max(len(s) for s in stacks)
    lines = []
    for row in range(height):
        parts = []
        for stack in stacks:
            text, color = stack[row] if row < len(stack) else ("", None)
            parts.append(output.paint(text, color) + " " * (cols - output.width(text)))
        lines.append((" " * GAP).join(parts).rstrip())
    return f"team {doc['team']}: task board\n\n" + "\n".join(lines)


# -- live --------------------------------------------------------------------------------
MIN_FRAME = 0.25  # a busy team writes files all the time: at most 4 frames a second


#: what `status --watch` shows again for: a roster, a member, a task, a request, a spend
#: (not the journal's every line)
STATUS_KINDS = frozenset({Kind.TEAM, Kind.SPEC, Kind.MEMBER, Kind.TASK, Kind.REQUEST,
                          Kind.SPEND})
#: and `board --watch`: a task, or the roster that colours its owners
BOARD_KINDS = frozenset({Kind.TEAM, Kind.SPEC, Kind.TASK})


def watch(render: Callable[[int | None], str], feed: Feed, every: float) -> None:
    """Show `render(width)` again whenever `feed` reports a change, and at least every
    `every` seconds, until Ctrl-C, which ends it quietly (the caller exits 0). Closes
    `feed`."""
    try:
        with feed as watcher:
            shown = time.monotonic()

            def pause() -> None:
                nonlocal shown
                watcher.wait(every)
                rest = MIN_FRAME - (time.monotonic() - shown)
                if rest > 0:
                    time.sleep(rest)
                watcher.drain()
                shown = time.monotonic()

            if not output.colors_wanted():
                while True:  # no escape codes at all: one frame below the other
                    print(f"-- {time.strftime('%H:%M:%S')} --\n{render(terminal_width())}\n",
                          flush=True)
                    pause()
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            console = Console()

            def frame() -> Text:
                return Text.from_ansi(render(console.width))

            with Live(frame(), console=console, auto_refresh=False,
                      vertical_overflow="visible") as live:
                while True:
                    pause()
                    live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        pass
