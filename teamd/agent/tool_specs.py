"""The tools a member's model is given (CONTRACT.md §8), as the model sees them: names,
descriptions and input schemas, in a stable order (prompt caching), and which tools each
kind of member gets. What the tools do is in `tool_handlers`; the check of an input
against its schema in `tool_input`; running a call in `tools.Toolbox`.
"""

from __future__ import annotations

from typing import Any

from teamd import board

__all__ = ["GATED", "KINDS", "LEAD_ONLY", "SEND_TYPES", "TOOL_SPECS", "specs_for",
           "tool_names"]

KINDS = ("teammate", "lead")
#: refused in plan mode until a plan is approved (CONTRACT §6)
GATED = ("bash", "write_file", "edit_file")
_IDS = {"type": "array", "items": {"type": "integer", "minimum": 1}}


def _spec(name: str, description: str, properties: dict[str, Any],
          required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "input_schema": {"type": "object", "properties": properties,
                             "required": required, "additionalProperties": False}}


# Insertion order is the order the model sees; it must not change between calls, or the
# cached prompt prefix (tools come first) is invalidated.
TOOL_SPECS: dict[str, dict[str, Any]] = {s["name"]: s for s in (
    _spec("bash",
          "Run a shell command with `bash -c` in your working directory and get its combined "
          "stdout and stderr plus the exit code. stdin is closed, so interactive commands "
          "fail: pass flags like `-y`. The command has a time limit (`timeout` seconds, "
          "capped by the team's setting); on timeout it and everything it started are "
          "killed. Anything still running when the command returns (background jobs) is "
          "killed too, so run long jobs in the foreground. Long output keeps only its start "
          "and end: filter with grep/head/tail. Obviously destructive commands (rm -rf /, "
          "mkfs, shutdown …) are refused.",
          {"command": {"type": "string", "minLength": 1,
                       "description": "The command line, run by bash."},
           "timeout": {"type": "number", "exclusiveMinimum": 0,
                       "description": "Seconds before the command is killed (optional)."}},
          ["command"]),
    _spec("read_file",
          "Read a text file inside your working directory (a path relative to it, or an "
          "absolute path inside it; paths that lead outside, also through symlinks, are "
          "refused). Returns the text as is; long files are cut at about 50,000 characters "
          "and say so. Use `limit` to read only the first lines; use bash (sed -n, grep) "
          "for a range in the middle.",
          {"path": {"type": "string", "minLength": 1, "description": "File to read."},
           "limit": {"type": "integer", "minimum": 1,
                     "description": "Read at most this many lines (optional)."}},
          ["path"]),
    _spec("write_file",
          "Create or overwrite a file inside your working directory with `content` "
          "(UTF-8). Missing parent folders are created. The whole file is replaced "
          "atomically; to change part of a file prefer edit_file.",
          {"path": {"type": "string", "minLength": 1, "description": "File to write."},
           "content": {"type": "string", "description": "The complete new content."}},
          ["path", "content"]),
    _spec("edit_file",
          "Replace one exact piece of text in a file inside your working directory. "
          "`old_text` must appear exactly once (copy it from read_file, whitespace and all; "
          "if it appears several times, include surrounding lines to make it unique).",
          {"path": {"type": "string", "minLength": 1, "description": "File to edit."},
           "old_text": {"type": "string", "minLength": 1,
                        "description": "The exact text to replace; must occur once."},
           "new_text": {"type": "string", "description": "The replacement text."}},
          ["path", "old_text", "new_text"]),
    _spec("TaskCreate",
          "Add a task to the team's shared task board. It starts `pending` with no owner. "
          "`blocked_by` lists task ids that must be completed before this one can start. "
          "Idle teammates claim the lowest-numbered unblocked, unowned task on their own.",
          {"subject": {"type": "string", "minLength": 1,
                       "description": "One line saying what is to be done."},
           "description": {"type": "string", "description": "Details (optional)."},
           "blocked_by": {**_IDS, "description": "Ids of tasks this one waits on (optional)."}},
          ["subject"]),
    _spec("TaskGet",
          "Show one task of the board in full (JSON): subject, description, status, owner, "
          "blocked_by, blocks and timestamps.",
          {"task_id": {"type": "integer", "minimum": 1, "description": "The task's id."}},
          ["task_id"]),
    _spec("TaskUpdate",
          "Change a task on the board. Start a task with status `in_progress` (it becomes "
          "yours if it has no owner; a task that is blocked or owned by someone else cannot "
          "be started this way), and set `completed` as soon as it is done, so the tasks it "
          "blocks become available. `owner` assigns the task to a team member by name "
          "(null clears it). `add_blocked_by` / `add_blocks` add dependencies (cycles are "
          "refused).",
          {"task_id": {"type": "integer", "minimum": 1, "description": "The task's id."},
           "status": {"type": "string", "enum": list(board.STATUSES),
                      "description": "New status (optional)."},
           "owner": {"type": ["string", "null"],
                     "description": "Member name to own the task, or null for none "
                                    "(optional)."},
           "add_blocked_by": {**_IDS, "description": "Task ids this task must wait for."},
           "add_blocks": {**_IDS, "description": "Task ids that must wait for this task."}},
          ["task_id"]),
    _spec("TaskList",
          "List every task on the board, one line each: id, status, owner, the ids it is "
          "blocked by, and subject.",
          {}, []),
    _spec("SendMessage",
          "Send a message to a team member's inbox (the lead is `lead`; in a team with an "
          "LLM lead, the person running the team is `user`). Types:\n"
          "- `message` (default): text to one member, named by `recipient`.\n"
          "- `broadcast`: the same text to every running member and the lead (`recipient` "
          "is ignored; use \"*\"). Use sparingly.\n"
          "- `shutdown_response`: your answer to a shutdown_request you received. Give "
          "`request_id` from that request and `approve` true or false; the answer goes to "
          "whoever asked. Approving ends your work: this process stops after the "
          "turn. To refuse, set approve false with a `reason`, then carry on.\n"
          "- `shutdown_request` (lead only): ask `recipient` to stop; `reason` says why. "
          "The answer arrives in your inbox.\n"
          "- `plan_approval_response` (lead only): answer a plan_approval_request with its "
          "`request_id`, `approve`, and `feedback` (required when rejecting).\n"
          "- `permission_response` (lead only): answer a permission_request (a teammate's "
          "tool call that waits for your go) with its `request_id` and `approve`; "
          "`feedback` tells the teammate why when refusing.\n"
          "`summary` is an optional one-line gist for listings.",
          {"recipient": {"type": "string", "description": "Member name, `lead`, `user`, or "
                                                          "\"*\" for a broadcast."},
           "content": {"type": "string", "description": "The message text."},
           # No enum: which types are allowed depends on the sender's kind, and the
           # handler's refusal says so, which an enum failure could not.
           "type": {"type": "string",
                    "description": "message (default), broadcast, shutdown_response; "
                                   "the lead also shutdown_request, plan_approval_response, "
                                   "permission_response."},
           "request_id": {"type": "string", "description": "For shutdown_response, "
                          "plan_approval_response and permission_response."},
           "approve": {"type": "boolean", "description": "For shutdown_response, "
                       "plan_approval_response and permission_response."},
           "reason": {"type": "string", "description": "Why (shutdown_request, or refusing "
                                                       "a shutdown)."},
           "feedback": {"type": "string", "description": "For plan_approval_response and "
                                                        "permission_response."},
           "summary": {"type": "string", "description": "One line for listings (optional)."}},
          ["recipient", "content"]),
    _spec("SubmitPlan",
          "Submit your plan to the lead for approval. In plan mode bash, write_file and "
          "edit_file are refused until a plan is approved: read and explore first, then "
          "submit a concrete plan (what you will change, where, how you will check it). The "
          "lead's plan_approval_response arrives in your inbox: on approval the tools open; "
          "on rejection revise the plan along the feedback and submit again.",
          {"plan": {"type": "string", "minLength": 1, "description": "The plan, in prose or "
                                                                     "as a list of steps."}},
          ["plan"]),
    _spec("TeamCreate",
          "Create a new, empty team (its roster, inboxes and task board).",
          {"name": {"type": "string", "description": "Team name: a-z, 0-9, '-' and '_'."},
           "description": {"type": "string", "description": "What the team is for."}},
          ["name"]),
    _spec("TeamDelete",
          "Delete a team: it stops accepting work, every running member is asked to shut "
          "down, and its folders are removed once all of them have exited.",
          {"name": {"type": "string", "description": "The team to delete."}},
          ["name"]),
    _spec("Task",
          "Spawn a new teammate: an autonomous agent process in team `team_name`, started by "
          "the supervisor. `prompt` is its standing instruction; give it work through the "
          "task board (TaskCreate) or SendMessage. With `plan_mode_required` it may only "
          "read until you approve a plan it submits. With `worktree` it works in its own "
          "git worktree on its own branch (default: the team's setting), and each task it "
          "completes is committed there.",
          {"name": {"type": "string", "description": "Member name: a-z, 0-9, '-', '_'."},
           "prompt": {"type": "string", "minLength": 1,
                      "description": "What this teammate is for and how to work."},
           "team_name": {"type": "string", "description": "The team to join."},
           "role": {"type": "string", "description": "Short role, e.g. 'backend engineer'."},
           "plan_mode_required": {"type": "boolean",
                                  "description": "Read-only until its plan is approved."},
           "worktree": {"type": "boolean",
                        "description": "Its own git worktree and branch (optional)."},
           "effort": {"type": "string", "enum": ["low", "medium", "high", "max"],
                      "description": "How hard it thinks (optional; default: the team's "
                      "setting)."},
           "runtime": {"type": "string", "enum": ["teamd", "claude-code"],
                       "description": "Its agent: teamd's own, or Claude Code (optional; "
                       "default: the team's)."},
           "host": {"type": "string", "description": "The host it must run on, with a "
                    "PostgreSQL store (optional; default: the leader places it)."}},
          ["name", "prompt", "team_name"]),
)}

LEAD_ONLY = ("TeamCreate", "TeamDelete", "Task")
_KIND_TOOLS: dict[str, tuple[str, ...]] = {
    "teammate": tuple(n for n in TOOL_SPECS if n not in LEAD_ONLY),
    "lead": tuple(n for n in TOOL_SPECS if n != "SubmitPlan"),
}
#: the `SendMessage` types each kind may send (CONTRACT §8)
SEND_TYPES = {"teammate": ("message", "broadcast", "shutdown_response"),
              "lead": ("message", "broadcast", "shutdown_response", "shutdown_request",
                       "plan_approval_response", "permission_response")}


def tool_names(kind: str) -> list[str]:
    """The tools a member of `kind` ("teammate" or "lead") gets, in spec order."""
    if kind not in _KIND_TOOLS:
        raise ValueError(f"unknown member kind {kind!r}; one of: {', '.join(KINDS)}")
    return list(_KIND_TOOLS[kind])


def specs_for(kind: str) -> list[dict[str, Any]]:
    """Tool definitions for `kind`, always in the same order (prompt caching)."""
    return [TOOL_SPECS[name] for name in tool_names(kind)]

