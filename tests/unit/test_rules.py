"""Permission rules (CONTRACT.md §11): parsing, the main argument, the order of decision,
the team's "always" answers, and the quoting edge cases of bash commands and paths."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from teamd import actions, hooks, permissions, settings
from teamd.agent import tools_files
from teamd.errors import BadInput
from teamd.layout import Workspace
from teamd.permission_rules import Permissions, parse_rule
from teamd.permissions import decide, escape, main_argument


def perms(default: str = "allow", **lists: list[str]) -> Permissions:
    return Permissions(default=default, **{k: tuple(parse_rule(r) for r in v)
                                           for k, v in lists.items()})


def verdict(p: Permissions, tool: str, cwd: Path, always: tuple[str, ...] = (),
            **inp: str) -> tuple[str, str]:
    v = decide(p, tuple(parse_rule(r) for r in always), tool, inp, cwd)
    return v.action, v.rule


@pytest.mark.parametrize("text, tool, pattern", [
    ("bash", "bash", None), ("read_file", "read_file", None),
    ("bash(git push*)", "bash", "git push*"), ("write_file(.git/*)", "write_file", ".git/*"),
    ("edit_file(src/*.py)", "edit_file", "src/*.py"), ("  bash(ls)  ", "bash", "ls"),
    ("bash(echo (a) b)", "bash", "echo (a) b"),  # parentheses inside the pattern
    # Claude Code's own tools, by their names (CONTRACT §14)
    ("Bash", "Bash", None), ("Bash(git push*)", "Bash", "git push*"),
    ("WebFetch(https://*)", "WebFetch", "https://*"), ("Agent", "Agent", None),
])
def test_rules_parse(text: str, tool: str, pattern: str | None) -> None:
    rule = parse_rule(text)
    assert (rule.tool, rule.pattern, rule.text) == (tool, pattern, text.strip())


@pytest.mark.parametrize("text", ["TaskCreate", "SendMessage(x)", "Task", "bash(", "bash()",
                                  "bash(x", "bash x", "(x)", "", "read_file[x]", "Agent(x)",
                                  "webFetch"])
def test_bad_rules_are_refused_naming_the_rule(text: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_rule(text)
    assert f'"{text}"' in str(info.value)


def test_order_deny_then_always_then_ask_then_allow_then_default(tmp_path: Path) -> None:
    p = perms("ask", allow=["bash(git *)"], ask=["bash(git push*)"], deny=["bash(*--force*)"])
    assert verdict(p, "bash", tmp_path, command="git diff") == ("allow", "bash(git *)")
    assert verdict(p, "bash", tmp_path, command="git push origin main") == \
        ("ask", "bash(git push*)")
    assert verdict(p, "bash", tmp_path, command="git push --force") == \
        ("deny", "bash(*--force*)")
    assert verdict(p, "bash", tmp_path, command="make") == ("ask", "default")
    # the team's always rules come after deny, before ask
    always = ("bash(git push origin main)",)
    assert verdict(p, "bash", tmp_path, always, command="git push origin main") == \
        ("allow", "bash(git push origin main)")
    assert verdict(p, "bash", tmp_path, always, command="git push origin main --force") == \
        ("deny", "bash(*--force*)")
    # a rule without a pattern takes any input; unruled tools are never decided
    assert verdict(perms(deny=["read_file"]), "read_file", tmp_path, path="x") == \
        ("deny", "read_file")
    assert verdict(perms("deny"), "TaskList", tmp_path)[0] == "allow"


def test_bash_commands_with_spaces_and_chains(tmp_path: Path) -> None:
    p = perms(allow=["bash(pytest*)"], deny=["bash(*rm -rf*)", "bash(rm *)"], default="ask")
    assert main_argument("bash", {"command": "   pytest -q  \n"}, tmp_path) == "pytest -q"
    assert verdict(p, "bash", tmp_path, command="   pytest -q") == ("allow", "bash(pytest*)")
    assert verdict(p, "bash", tmp_path, command="\t rm x") == ("deny", "bash(rm *)")
    # the pattern sees the whole command: a chain does not hide the second command
    assert verdict(p, "bash", tmp_path, command="cd x && rm -rf y") == \
        ("deny", "bash(*rm -rf*)")
    assert verdict(p, "bash", tmp_path, command="pytest -q; echo ok\nrm -rf /tmp/y") == \
        ("deny", "bash(*rm -rf*)")
    assert verdict(p, "bash", tmp_path, command="pytest && rm -rf build") == \
        ("deny", "bash(*rm -rf*)")
    assert verdict(p, "bash", tmp_path, command="echo 'rm -rf' is bad")[0] == "deny"


def test_paths_are_made_relative_and_normalised(tmp_path: Path) -> None:
    p = perms(deny=["write_file(.git/*)", "read_file(.git/*)"])
    for path in ("./a/../.git/config", ".git/config", ".//.git/./config",
                 str(tmp_path / ".git" / "config"), "a/b/../../.git/config"):
        assert main_argument("write_file", {"path": path, "content": ""}, tmp_path) == \
            ".git/config", path
        assert verdict(p, "write_file", tmp_path, path=path, content="x") == \
            ("deny", "write_file(.git/*)"), path
    assert verdict(p, "write_file", tmp_path, path="git/config", content="x")[0] == "allow"
    # a link into .git is judged by where it lands as well as by its name
    (tmp_path / ".git").mkdir()
    (tmp_path / "innocent").symlink_to(tmp_path / ".git")
    assert verdict(p, "read_file", tmp_path, path="innocent/config") == \
        ("deny", "read_file(.git/*)")
    # a link followed by `..` lands where the link points, not where its name suggests:
    # `d/../config` with `d -> .git/hooks` writes .git/config (the tool resolves it so too)
    (tmp_path / ".git" / "hooks").mkdir()
    (tmp_path / "d").symlink_to(tmp_path / ".git" / "hooks")
    assert tools_files.confine(tmp_path, "d/../config") == (tmp_path / ".git" / "config")
    assert verdict(p, "write_file", tmp_path, path="d/../config", content="x") == \
        ("deny", "write_file(.git/*)")


def test_escape_makes_a_glob_that_matches_only_itself() -> None:
    assert escape("rm *.tmp [a]?") == "rm [*].tmp [[]a][?]"
    for arg in ("ls *", "a?b", "x[1]", "plain", "[*?[]]"):
        assert fnmatch.fnmatchcase(arg, escape(arg))
        assert not fnmatch.fnmatchcase(arg + "x", escape(arg))
    assert not fnmatch.fnmatchcase("ls a", escape("ls *"))


def test_always_rules_live_in_the_team_file(ws: Workspace, tmp_path: Path) -> None:
    actions.create_team(ws, "t")
    assert permissions.always_rules(ws, "t") == ()
    rule = permissions.add_always(ws, "t", permissions.always_rule("bash", "rm *.tmp"))
    assert rule == "bash(rm [*].tmp)"
    assert permissions.add_always(ws, "t", rule) == rule  # once
    path = ws.store.paths.team_dir("t") / "permissions.json"
    doc = json.loads(path.read_text())
    assert doc == {"schema": 1, "allow": ["bash(rm [*].tmp)"]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    always = permissions.always_rules(ws, "t")
    p = perms(ask=["bash(rm*)"])
    assert decide(p, always, "bash", {"command": "rm *.tmp"}, tmp_path).action == "allow"
    assert decide(p, always, "bash", {"command": "rm a.tmp"}, tmp_path).action == "ask"


def test_settings_rules_reach_decide(ws: Workspace, tmp_path: Path) -> None:
    ws.settings_file.write_text('[permissions]\ndefault = "deny"\nallow = ["bash(ls*)"]\n')
    p = settings.load(ws).permissions
    assert decide(p, (), "bash", {"command": "ls -l"}, tmp_path).action == "allow"
    assert decide(p, (), "bash", {"command": "cat x"}, tmp_path).rule == "default"


# -- the README's worked example, as written -----------------------------------------------
DOCS = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"


def test_the_worked_example_does_what_the_docs_say(
        ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toml of docs/permissions.md: pytest and git diff run freely, git push asks,
    .git/ is never touched, and a task cannot complete while `pytest -q` fails."""
    example = re.search(r"```toml\n(.*?)```", DOCS.read_text(), re.S)
    assert example is not None
    ws.settings_file.write_text(example.group(1))
    conf = settings.load(ws)
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)

    def act(tool: str, **inp: str) -> str:
        return decide(conf.permissions, (), tool, inp, project).action

    assert act("bash", command="pytest -q tests/") == "allow"
    assert act("bash", command="git diff HEAD~1") == "allow"
    assert act("bash", command="git push origin main") == "ask"
    assert act("bash", command="make deploy") == "ask"  # the default
    assert act("write_file", path="./src/../.git/hooks/pre-commit", content="") == "deny"
    assert act("edit_file", path=".git/config", old_text="a", new_text="b") == "deny"
    assert act("bash", command="cat .git/config") == "deny"
    assert act("write_file", path="src/app.py", content="") == "allow"

    # the quality gate, with the real pytest on a real failing test
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    actions.create_team(ws, "t")
    (project / "test_app.py").write_text("def test_sum():\n    assert 1 + 1 == 3\n")
    gate = conf.hooks["task_completed"]
    failing = hooks.run(ws, "t", "alice", project, "task_completed", gate, 120,
                        task={"id": 1, "subject": "x"})
    assert failing.blocked and "1 failed" in failing.reason
    (project / "test_app.py").write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    passing = hooks.run(ws, "t", "alice", project, "task_completed", gate, 120,
                        task={"id": 1, "subject": "x"})
    assert passing.exit == 0 and not passing.blocked


# -- the toolbox applies them --------------------------------------------------------------
def test_the_llm_leads_own_asks_go_to_the_person(ws: Workspace, tmp_path: Path) -> None:
    from teamd import inbox, requests
    from teamd.agent.tools import Toolbox

    ws.settings_file.write_text('[permissions]\nask = ["write_file"]\n')
    actions.create_team(ws, "t")
    work = tmp_path / "work"
    work.mkdir()
    # an LLM lead in the roster: the person beside it is `user`, who answers as `user`
    actions.spawn(ws, "t", "lead", "Lead the team", lead=True, cwd=str(work))
    seen: list[str] = []

    def person_approves(request_id: str) -> dict[str, object]:
        seen.append(request_id)
        asks = inbox.peek(ws, "t", "user")
        assert [(m["type"], m["sender"], m["request_id"]) for m in asks] == \
            [("permission_request", "lead", request_id)]
        actions.answer_request(ws, "t", request_id, True)
        return requests.get(ws, "t", request_id)

    box = Toolbox(ws, "t", "lead", kind="lead", cwd=work, bash_timeout=5,
                  plan_mode_required=False, waiter=person_approves)
    result = box.run("write_file", {"path": "a.txt", "content": "x"}, tool_use_id="toolu_1")
    assert not result.is_error and (work / "a.txt").read_text() == "x"
    record = requests.get(ws, "t", seen[0])
    assert (record["sender"], record["recipient"], record["ran"]) == ("lead", "user", True)
    answer = inbox.peek(ws, "t", "lead")
    assert [(m["type"], m["sender"], m["approve"]) for m in answer] == \
        [("permission_response", "user", True)]
    # the same call id again (a restart after it ran): found, and never run twice
    (work / "a.txt").unlink()
    again = box.run("write_file", {"path": "a.txt", "content": "x"}, tool_use_id="toolu_1")
    assert again.is_error and again.content == "interrupted by a restart; not re-run"
    assert not (work / "a.txt").exists() and seen == [record["request_id"]]
    # a toolbox that cannot wait refuses an ask instead of hanging
    bare = Toolbox(ws, "t", "lead", kind="lead", cwd=work, bash_timeout=5,
                   plan_mode_required=False)
    refused = bare.run("write_file", {"path": "b.txt", "content": "x"})
    assert refused.is_error and "needs permission" in refused.content


def test_a_bad_always_changes_nothing_and_the_person_may_answer_by_send(
        ws: Workspace, tmp_path: Path) -> None:
    """`approve --always` on a call with no argument is refused before the answer (exit 2,
    nothing changed: the member would otherwise wait for a response that never comes); the
    person beside an LLM lead may answer a teammate's ask with `send --type
    permission_response`, as `user`."""
    from teamd import inbox, requests
    from teamd.errors import BadInput

    work = tmp_path / "work"
    work.mkdir()
    actions.create_team(ws, "t")
    actions.spawn(ws, "t", "lead", "Lead the team", lead=True, cwd=str(work))
    actions.spawn(ws, "t", "alice", "Work", cwd=str(work))
    blank = permissions.open_ask(ws, "t", "alice", "lead", "bash", {"command": "   "}, "",
                                 "default", "perm-00000000aa")
    with pytest.raises(BadInput, match="--always needs a call with an argument"):
        actions.answer_request(ws, "t", blank["request_id"], True, always=True)
    assert requests.get(ws, "t", blank["request_id"])["status"] == "pending"
    assert not inbox.peek(ws, "t", "alice")
    assert permissions.always_rules(ws, "t") == ()
    ask = permissions.open_ask(ws, "t", "alice", "lead", "bash", {"command": "git push"},
                               "git push", "bash(git push*)", "perm-00000000bb")
    actions.send(ws, "t", "alice", "go ahead", type_="permission_response",
                 request_id=ask["request_id"], approve=True)
    assert requests.get(ws, "t", ask["request_id"])["status"] == "approved"
    [answer] = [m for m in inbox.peek(ws, "t", "alice") if m["type"] == "permission_response"]
    assert (answer["sender"], answer["approve"]) == ("user", True)


def test_claude_code_calls_meet_rules_on_their_own_tool_and_on_the_ruled_one(
        tmp_path: Path) -> None:
    def claude(p: Permissions, tool: str | None, own: str, **inp: str) -> tuple[str, str]:
        v = decide(p, (), tool, dict(inp) if tool else {}, tmp_path, own=(own, dict(inp)))
        return v.action, v.rule

    p = perms(deny=["Bash(rm *)", "WebFetch"], ask=["bash(git push*)"])
    assert claude(p, "bash", "Bash", command="rm -r x") == ("deny", "Bash(rm *)")
    assert claude(p, "bash", "Bash", command="git push") == ("ask", "bash(git push*)")
    # a rule naming Claude Code's tool applies to it only, never to the built-in bash
    assert verdict(p, "bash", tmp_path, command="rm -r x") == ("allow", "default")
    assert claude(p, None, "WebFetch", url="https://example.com/") == ("deny", "WebFetch")
    # a tool no rule names (and no ruled tool stands for) is decided by the default
    assert claude(perms("ask"), None, "WebSearch", query="q") == ("ask", "default")
    assert claude(perms("ask", allow=["WebSearch(teamd *)"]), None, "WebSearch",
                  query="teamd docs") == ("allow", "WebSearch(teamd *)")
    # paths are made relative to the cwd, as for the ruled file tools
    assert claude(perms(deny=["Write(.git/*)"]), "write_file", "Write",
                  file_path=str(tmp_path / ".git" / "config")) == ("deny", "Write(.git/*)")


def test_the_team_tools_no_rule_names_are_the_tools_the_model_is_given() -> None:
    from teamd.agent.tool_specs import TOOL_SPECS
    from teamd.permission_rules import RULED, TEAM_TOOLS

    assert set(TOOL_SPECS) - set(RULED) == TEAM_TOOLS
