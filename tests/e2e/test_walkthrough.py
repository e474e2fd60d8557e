"""The README's "Using it" walk-through, run as a new user without an API key runs it: its
commands exactly, in order, through `/bin/bash`, offline on the scripted model with the
scenario shipped in the package (issue 19). Only the port is changed, to a free one; the
test paces it the way a person reading the output does (waiting for the tasks to be done
before sending, for the answer before detaching), and ends `attach` and `logs --follow`
with Ctrl-C (SIGINT), as a person does."""

from __future__ import annotations

import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

from teamd import board, inbox
from teamd.layout import Workspace
from tests.harness import Reader, wait_until
from tests.helpers_proc import clean_env

REPO = Path(__file__).resolve().parents[2]
README_PORT = "8765"


def walkthrough() -> list[str]:
    """The lines of the first code fence under "## Using it"."""
    text = (REPO / "README.md").read_text().split("\n## Using it\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class Shell:
    """Runs a walk-through line by line as one shell session would: what a line exports
    stays for the next, `cmd &` starts a job, `kill %name` ends it."""

    def __init__(self, home: Path, scratch: Path) -> None:
        self.scratch = scratch  # where each line leaves its environment for the next
        self.env = {**clean_env(), "HOME": str(home), "PYTHONUNBUFFERED": "1"}
        self.jobs: dict[str, subprocess.Popen[bytes]] = {}
        self.cwd = REPO

    def run(self, line: str) -> str:
        """A foreground line; exit 0 expected. Returns its standard output."""
        dump = self.scratch / "env"
        script = f"{line}\nrc=$?\nenv -0 > {shlex.quote(str(dump))}\nexit $rc\n"
        done = subprocess.run(["/bin/bash", "-c", script], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        pairs = dump.read_bytes().split(b"\0")
        dump.unlink()
        self.env = dict(p.decode().split("=", 1) for p in pairs if b"=" in p)
        return done.stdout

    def source(self, activate: str) -> None:
        venv = (self.cwd / activate).parent.parent
        assert (venv / "bin" / "activate").is_file()
        # this very venv: the one running the tests, which the quick start made
        self.env["PATH"] = f"{Path(sys.executable).parent}:{self.env['PATH']}"
        self.env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)

    def background(self, command: str) -> None:
        name = shlex.split(command)[0]
        self.jobs[name] = subprocess.Popen(["/bin/bash", "-c", f"exec {command}"],
                                           cwd=self.cwd, env=self.env)

    def kill(self, names: list[str]) -> None:
        for name in names:
            job = self.jobs.pop(name)
            job.send_signal(signal.SIGTERM)
            assert job.wait(60) == 0, name

    def interrupt_after(self, command: str, text: str) -> str:
        """A line that runs until Ctrl-C: once `text` shows, SIGINT; exit 0 expected."""
        proc = subprocess.Popen(["/bin/bash", "-c", f"exec {command}"], cwd=self.cwd,
                                env=self.env, stdout=subprocess.PIPE)
        reader = Reader(proc)
        try:
            reader.wait_for(text, 60)
        finally:
            proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, command
        reader.thread.join(10)
        return "\n".join(reader.lines)


def test_the_readme_walkthrough_runs_offline_with_the_shipped_scenario(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shell = Shell(home, tmp_path)
    port = free_port()
    lines = walkthrough()
    offline = [line for line in lines if line.rstrip().endswith("# offline")]
    assert len(offline) == 2 and "--scenario walkthrough" in offline[0]  # the shipped one
    ws = Workspace.at(home / "proj")
    try:
        for line in lines:
            command = line.split("  #", 1)[0].strip().replace(README_PORT, port)
            words = shlex.split(command)
            if words[0] == "source":
                shell.source(words[1])
            elif command.endswith("&"):
                shell.background(command[:-1].strip())
                if words[0] == "teamd":
                    wait_until(lambda: (home / "proj" / ".teams" / "teamd.json").exists(),
                               30, "teamd to start")
            elif words[0] == "kill":
                shell.kill([w.lstrip("%") for w in words[1:]] + ["python"])
            elif words[:2] == ["teamctl", "attach"]:
                out = shell.interrupt_after(command, "Noted: Finish the login page first")
                assert "Taking task #1: Analyze REST endpoints." in out
            elif "--follow" in words:
                out = shell.interrupt_after(command, "backend")
            elif words[:2] == ["teamctl", "send"]:
                # as a person does: the status showed the work going on; once the two
                # tasks are done, the lead asks for the next thing
                wait_until(lambda: [t["status"] for t in board.list_tasks(ws, "webapp")]
                           == ["completed", "completed"], 60, "both tasks to be completed")
                shell.run(command)
            elif words[:2] == ["teamctl", "inbox"]:
                wait_until(lambda: any("I will do that first" in m["content"]
                                       for m in inbox.peek(ws, "webapp", "lead")), 30,
                           "backend's answer in the lead's inbox")
                out = shell.run(command)
                for said in ("Task #1 is done", "Task #2 is done", "I will do that first"):
                    assert said in out, out
            elif words[:2] == ["teamctl", "status"]:
                out = shell.run(command)
                assert "supervisor: pid" in out and "backend" in out
                assert "ANTHROPIC_API_KEY" not in out  # a key is set (offline's own)
            else:
                shell.run(command)
        # the scripted model did the work in the root, where backend works
        assert (home / "proj" / "notes" / "task-2.md").read_text().startswith(
            "# Design GraphQL schema")
        assert not shell.jobs
    finally:
        for job in shell.jobs.values():
            job.kill()
            job.wait(10)


def test_a_scenario_that_is_neither_a_file_nor_shipped_is_one_clear_line() -> None:
    done = subprocess.run([sys.executable, "-m", "teamd.scripted", "--scenario", "walkthru"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "teamd.scripted: cannot read scenario walkthru: No such file or directory (nor a "
        "shipped one: walkthrough)"]
