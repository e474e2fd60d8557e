"""A teammate as the seed design runs it, for comparison only: a fresh interpreter that
imports `anthropic`, builds its own client, asks the model, then idles in the seeds' loop —
every second, read-and-clear the inbox and scan the board for an unclaimed task.

    python -m bench.baselines.seed_member --team T --name N --inbox PATH --tasks DIR

`ANTHROPIC_BASE_URL` points it at the scripted server. It runs until SIGTERM. The system
prompt opens with the seeds' identity line, which is also how the server tells who asks.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import anthropic

from bench.baselines.seed_board import claim
from bench.baselines.seed_inbox import read_inbox

MODEL = "claude-sonnet-4-5"
TOOLS: Any = [  # Any: the SDK types its params as TypedDicts
    {"name": "bash", "description": "Run a shell command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                      "required": ["command"]}},
    {"name": "SendMessage", "description": "Send a message to a teammate.",
     "input_schema": {"type": "object", "properties": {"recipient": {"type": "string"},
                                                       "content": {"type": "string"}},
                      "required": ["recipient", "content"]}},
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--team", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--inbox", type=Path, required=True)
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--poll", type=float, default=1.0, help="the seeds poll every second")
    ap.add_argument("--prompt", default="Wait for instructions.")
    args = ap.parse_args()

    client = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY") or "missing")
    system = (f"You are teammate '{args.name}' in team '{args.team}'. Work on your assigned "
              "tasks. Use TaskList to find tasks. Use SendMessage to communicate.")
    messages: Any = [{"role": "user", "content": args.prompt}]
    while True:
        # active: one model call (the scripted replies carry no tool calls)
        response = client.messages.create(model=MODEL, system=system, messages=messages,
                                          tools=TOOLS, max_tokens=8000)
        messages.append({"role": "assistant", "content": response.content})
        # idle: poll the inbox and the board every second until there is work
        while True:
            new = read_inbox(args.inbox)
            if new:
                messages.append({"role": "user",
                                 "content": f"<inbox>{json.dumps(new, indent=2)}</inbox>"})
                break
            task_id = claim(args.tasks, args.name) if args.tasks.is_dir() else None
            if task_id is not None:
                messages.append({"role": "user", "content": f"Task #{task_id}: ..."})
                break
            time.sleep(args.poll)


if __name__ == "__main__":
    raise SystemExit(main())
