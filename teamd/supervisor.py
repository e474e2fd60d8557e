"""`teamd run`: keep the roster true with real processes.

The arbiter, after gunicorn's: signal handlers only enqueue (and wake the loop through the
wakeup fd); the main loop dispatches `handle_<signal>`, reconciles the roster's `desired`
state with its children when inotify says a file that matters changed, and runs timers
(SIGKILL after `stop_timeout`, backoff restarts, the systemd watchdog). Every teammate is
forked from this single-threaded parent after the heavy modules are imported once.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import resource
import select
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from teamd import __version__, actions, events, files, inbox, pidfile, policy, roster
from teamd import assign as assign_mod
from teamd import settings as settings_mod
from teamd import wake as wake_mod
from teamd.deprecations import lookup as model_deprecation
from teamd.errors import BadInput, TeamdError
from teamd.files import Json
from teamd.layout import LEAD, NAME_RE, SUPERVISOR, USER, Workspace
from teamd.notify import NOTIFY_ENV_KEYS, Notifier, format_status, scrub_child_env
from teamd.proc import (
    EXIT_BOOT_ERROR,
    EXIT_NO_SPACE,
    become_subreaper,
    close_fds,
    decode_wait_status,
    describe_exit,
    die_with_parent,
    drain_fd,
    raise_oom_score_adj,
    redirect_stdio,
    reset_signals,
    wipe_environ_block,
)
from teamd.watch import Watcher

log = logging.getLogger(__name__)

SAFETY_INTERVAL = 5.0  # a reconcile at least this often, in case a wakeup was missed
WAIT_LIVE_INTERVAL = 0.2  # re-check while a previous supervisor's process winds down
INBOX_SUFFIX = "_inbox.jsonl"
RELEVANT_SUFFIXES = ("config.json", INBOX_SUFFIX, ".highwatermark")
#: back-off of a member that cannot start for want of space (CONTRACT §3, §4 "Exits")
SPACE_RETRY_FIRST, SPACE_RETRY_MAX = 1.0, 30.0
#: descriptors a fork needs free in teamd (its go pipe, then the roster and journal writes
#: that record it); with fewer, teamd does not fork (RLIMIT_NOFILE set too low)
FD_HEADROOM = 8
FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def spare_fds() -> tuple[int, int] | None:
    """(descriptors still free, the RLIMIT_NOFILE soft limit), or None without a limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        used = len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself used
    except OSError as exc:
        if exc.errno in FD_ERRNOS:
            return 0, soft
        return None  # no /proc: nothing to judge by
    return soft - used, soft


@dataclass
class Child:
    team: str
    name: str
    pid: int
    create_time: float
    started_at: float
    term_sent_at: float | None = None
    restarting: bool = False
    aborted: bool = False
    wake_w: int | None = None  # the write end of its wake pipe (`teamd.wake`), until reaped

    @property
    def key(self) -> tuple[str, str]:
        return (self.team, self.name)


class Supervisor:
    SIGNALS = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.conf = settings_mod.load(ws)
        self.pid = os.getpid()
        self.children: dict[int, Child] = {}
        self.crashes: dict[tuple[str, str], policy.CrashHistory] = {}
        # (team, name) → (no fork before, last delay): members held back for want of space
        self.no_space: dict[tuple[str, str], tuple[float, float]] = {}
        self.orphans: dict[tuple[int, float], float] = {}  # (pid, start) → first seen
        self.models_checked: set[tuple[str, str]] = set()  # (team, model) since this start
        self.rosters: dict[str, Json] = {}  # each team's last roster that parsed
        self.broken: dict[str, str] = {}  # team → why its config.json does not parse
        self.sig_queue: list[int] = []
        self.stopping = False
        self.notifier = Notifier.from_env()
        self.watchdog_every = self.notifier.watchdog_interval()
        self.next_watchdog = 0.0
        self.next_sweep = 0.0  # the next look for strays we adopted (`kill_strays`)
        self.last_status = ""
        self.wake_at: float | None = None
        self._pipe: tuple[int, int] | None = None
        self._watcher: Watcher | None = None
        self._lock: Any = None
        # i10: assignment state per team, and the teams whose roster or spend changed
        self.boards = assign_mod.Boards(ws)
        self.roster_touched: set[str] = set()

    # -- life cycle ----------------------------------------------------------------------
    def run(self) -> int:
        self._lock = pidfile.claim(self.ws, __version__)
        self.preload()
        self.init_signals()
        become_subreaper()
        files.ensure_dir(self.ws.tasks_root)
        self._watcher = Watcher([self.ws.teams_dir, self.ws.tasks_root])
        for team in self.ws.team_names():
            self.watch_team(team)
            events.emit(self.ws, team, "supervisor_started", pid=self.pid)
        log.info("teamd %s supervising %s (pid %d)", __version__, self.ws.root, self.pid)
        self.reconcile()
        self.notifier.ready(self.status_line())
        try:
            while not self.stopping:
                dirty = self.sleep()
                self.dispatch_signals()
                if self.stopping:
                    break
                self.run_timers()
                if dirty:
                    self.reconcile()
        finally:
            self.stop_all()
        return 0

    def preload(self) -> None:
        """Import what every teammate needs once, here, so a fork starts warm; freeze the
        heap so the children's garbage collector leaves the shared pages alone."""
        import teamd.agent.loop  # noqa: F401
        from teamd.agent import model

        model.warm_up()
        gc.collect()
        gc.freeze()

    def init_signals(self) -> None:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pipe = (r, w)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        for sig in self.SIGNALS:
            signal.signal(sig, self.enqueue_signal)

    def enqueue_signal(self, signum: int, frame: object) -> None:
        self.sig_queue.append(signum)  # the loop does the work; handlers only take note

    def sleep(self) -> bool:
        """Wait for a signal, a file that matters, or the next timer. True when the roster
        should be reconciled (a journal line or a session write is not a reason)."""
        assert self._pipe is not None and self._watcher is not None
        if self.sig_queue:
            return True
        timeout = self.next_timeout()
        fds: list[Any] = [self._pipe[0]]
        if not self._watcher.polling:
            fds.append(self._watcher)
        try:
            ready, _, _ = select.select(fds, [], [], timeout)
        except InterruptedError:
            ready = []
        if not ready:
            return True  # a timer is due
        dirty = False
        if self._pipe[0] in ready:
            dirty = True
            drain_fd(self._pipe[0])
        if self._watcher in ready:
            changes, overflow = self._watcher.drain_events()
            if overflow:  # events were lost: read the boards again
                self.boards.reload_all()
            for folder, name in changes:
                handled = self.note_change(folder, name)  # i10: pokes, the board index
                if NAME_RE.fullmatch(name):  # a team folder came or went
                    dirty = True
                    self.watch_team(name)  # before its config.json lands, so none slips
                elif not handled and (name.endswith(RELEVANT_SUFFIXES) or (
                        name.endswith(".json") and name[:-5].isdigit())):
                    dirty = True
        return dirty

    def next_timeout(self) -> float:
        now = time.time()
        deadlines = [now + SAFETY_INTERVAL]
        for child in self.children.values():
            if child.term_sent_at is not None:
                deadlines.append(child.term_sent_at + self.conf.stop_timeout)
        if self.wake_at is not None:
            deadlines.append(self.wake_at)
        if self.watchdog_every:
            deadlines.append(self.next_watchdog)
        return max(0.0, min(deadlines) - now)

    def dispatch_signals(self) -> None:
        while self.sig_queue:
            sig = self.sig_queue.pop(0)
            name = signal.Signals(sig).name.lower()
            getattr(self, f"handle_{name[3:]}")()

    def handle_chld(self) -> None:
        self.reap_workers()

    def handle_term(self) -> None:
        log.info("stopping: the team keeps its desired state; members resume next start")
        self.stopping = True

    handle_int = handle_term

    def handle_hup(self) -> None:
        """Re-read teamd.toml. A broken file keeps the settings in force: a typo in an
        edit must not take the supervisor, and every teammate with it, down."""
        self.notifier.reloading()
        try:
            self.conf = settings_mod.load(self.ws)
            log.info("re-read %s", self.ws.settings_file)
        except TeamdError as exc:
            log.error("%s; keeping the settings in force", exc)
        self.notifier.ready(self.status_line())

    def watch_team(self, team: str) -> None:
        assert self._watcher is not None
        for folder in (self.ws.team_dir(team), self.ws.tasks_dir(team)):
            if folder.is_dir():
                self._watcher.add(folder)

    # -- timers --------------------------------------------------------------------------
    def run_timers(self) -> None:
        now = time.time()
        if self.watchdog_every and now >= self.next_watchdog:
            self.notifier.watchdog()
            self.next_watchdog = now + self.watchdog_every
        self.murder_workers()
        if now >= self.next_sweep:
            # a tool's daemon (its own session, so its group was not killed) is adopted by
            # us when its parent ends; no SIGCHLD says so while the teammate lives on
            self.next_sweep = now + SAFETY_INTERVAL
            self.kill_strays()

    def murder_workers(self) -> None:
        """SIGKILL children that ignored SIGTERM for stop_timeout."""
        now = time.time()
        for child in list(self.children.values()):
            if child.term_sent_at is not None and now - child.term_sent_at >= \
                    self.conf.stop_timeout:
                log.warning("%s/%s ignored SIGTERM for %gs: SIGKILL", child.team, child.name,
                            self.conf.stop_timeout)
                self.kill_worker(child, signal.SIGKILL)

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self) -> None:
        now = time.time()
        self.wake_at = None
        by_member = {c.key: c for c in self.children.values()}
        if self.orphans:
            self.orphans = {k: t for k, t in self.orphans.items() if psutil.pid_exists(k[0])}
        for team in self.ws.team_names():
            # one team's bad file (a hand-edited task, a missing folder) must not stop the
            # supervisor, and with it every other team
            try:
                config = self.load_roster(team)
                if config is not None:
                    self.reconcile_team(team, config, by_member, now)
            except Exception:
                log.exception("team %s: cannot reconcile; the other teams go on", team)
        self.update_status()

    def load_roster(self, team: str) -> Json | None:
        """The team's roster; None while its config.json does not parse (a hand edit, a
        truncated copy). Then the last good copy is kept in memory, nothing of the team is
        started or stopped, and the file is left as it is for a person to repair: said once
        in the log, naming the file, and again when it reads again."""
        try:
            config = roster.load(self.ws, team)
        except BadInput:
            raise
        except TeamdError as exc:
            if self.broken.get(team) != str(exc):
                self.broken[team] = str(exc)
                good = self.rosters.get(team)
                kept = (f"its last good copy ({len(good['members'])} members)" if good
                        else "no earlier copy")
                log.error("team %s: %s; keeping %s in memory, starting and stopping nothing "
                          "of the team, and leaving the file as it is until it is repaired",
                          team, exc, kept)
            return None
        if self.broken.pop(team, None) is not None:
            log.info("team %s: %s reads again", team, self.ws.config(team))
        self.rosters[team] = config
        return config

    def reconcile_team(self, team: str, config: Json, by_member: dict[tuple[str, str], Child],
                       now: float) -> None:
        deleting = config.get("state") == "deleting"
        members = config["members"]
        self.journal_deprecated_models(team, members)
        live = {m["name"] for m in members if (team, m["name"]) in by_member
                or roster.is_live(m)}
        wake: list[str] = []
        # i10: a teammate idle for less than wake.SETTLE may still send its idle notice:
        # the lead's quiet rule counts it as at work until then
        settling, settled_in = self.boards.settling(team, members, now)
        if settling:
            self.wake_in(settled_in)
        quiet_view = [dict(m, status="active") if m["name"] in settling else m for m in members]
        if not deleting:
            waiting = {m["name"] for m in members if m["status"] == "sleeping"
                       and self.has_waking_mail(team, m, quiet_view, live)}
            sent, due = self.boards.hand_out(  # i10: claims and sends tasks
                team, members, live, waiting, reload=self._watcher is None
                or self._watcher.polling)
            waiting |= sent
            if due is not None:
                self.wake_in(due - time.time())
            wake = policy.sleepers_to_wake(members, waiting, live)
        if team in self.roster_touched:  # i10: a paused member, a lead waiting for quiet
            self.roster_touched.discard(team)
            self.poke_members(team, wake_mod.roster_pokes(
                quiet_view, live, lambda name: wake_mod.has_mail(self.ws.inbox(team, name))))
        for m in members:
            child = by_member.get((team, m["name"]))
            if child is not None:
                if m["desired"] == "stopped" and m["status"] == "stopping":
                    self.let_leave(child)
                elif m["desired"] == "stopped":
                    self.kill_worker(child, signal.SIGTERM)
                elif (m.get("restart_requested_at") or 0) > child.started_at:
                    child.restarting = True
                    self.kill_worker(child, signal.SIGTERM)
                continue
            orphan = roster.process_of(m)
            if orphan is not None:
                self.end_orphan(team, m["name"], orphan, now)
                continue
            if m["desired"] != "running":
                if m["status"] != "shutdown":
                    self.mark(team, m["name"], "shutdown")
                continue
            if deleting:
                continue
            if (m.get("restart_requested_at") or 0) > (m.get("started_at") or 0):
                self.crashes.pop((team, m["name"]), None)
                self.spawn_worker(team, m["name"], reset=True)
            elif m["status"] in ("failed", "shutdown"):
                continue
            elif m["status"] == "backoff":
                due = m.get("restart_at") or 0
                if now >= due:
                    self.spawn_worker(team, m["name"])
                else:
                    self.wake_in(due - now)
            elif m["status"] == "sleeping":
                if m["name"] in wake:
                    self.spawn_worker(team, m["name"])
            else:
                self.spawn_worker(team, m["name"])
        if deleting and not any(c.team == team for c in self.children.values()) \
                and not actions.live_members(config):
            actions.remove_team(self.ws, team)
            if self._watcher is not None:  # a team created again under this name is new
                self._watcher.remove(self.ws.team_dir(team))
                self._watcher.remove(self.ws.tasks_dir(team))
            log.info("team_deleted: %s", team)

    def has_waking_mail(self, team: str, member: Json, members: list[Json],
                        live: set[str]) -> bool:
        """Mail that wakes `member` if it sleeps: any, except that idle notifications
        alone wake a sleeping LLM lead only once the team is quiet (CONTRACT §12); the
        roster change that makes it quiet brings the reconcile that wakes it."""
        waiting = inbox.peek(self.ws, team, member["name"])
        if member.get("kind") != "lead" or member["status"] != "sleeping":
            return bool(waiting)
        return policy.mail_wakes_lead(waiting, members, live, self.conf.lead_wake_on_idle)

    # -- i10: waking members through their pipes; handing out tasks --------------------
    def note_change(self, folder: Path | None, name: str) -> bool:
        """A file inotify named: poke the member whose inbox it is; keep the board index
        of its team up to date; remember a roster or spend change for `roster_pokes`.
        True when that was all there was to do: mail for a member that is up needs no
        reconcile (unless it was just given a task: its taking it in is news)."""
        if folder is None:
            return False
        if folder in (self.ws.teams_dir, self.ws.tasks_root):
            self.boards.forget(name)  # a team came or went: its board is new
            return False
        team = folder.name
        if folder.parent == self.ws.tasks_root:
            self.boards.note_file(team, name)
        elif name.endswith(INBOX_SUFFIX):
            owner = name[:-len(INBOX_SUFFIX)]
            return self.poke_members(team, [owner]) and not self.boards.is_given(team, owner)
        elif name in ("config.json", "spend.json") or folder.name == "members":
            self.roster_touched.add(team if folder.name != "members" else folder.parent.name)
        return False

    def poke_members(self, team: str, names: list[str]) -> bool:
        """Poke the live children among `names`; True if every one of them was poked."""
        poked = 0
        for child in self.children.values():
            if child.team == team and child.name in names and child.wake_w is not None:
                if wake_mod.poke(child.wake_w):
                    poked += 1
                else:
                    wake_mod.close(child.wake_w)  # the member is gone
                    child.wake_w = None
        return poked == len(names)

    def journal_deprecated_models(self, team: str, members: list[Json]) -> None:
        """`model_deprecated` once per model per start into each team that uses it."""
        for m in members:
            used = m.get("model") or self.conf.model
            if (team, used) in self.models_checked:
                continue
            self.models_checked.add((team, used))
            found = model_deprecation(used)
            if found is not None:
                log.warning("team %s: %s", team, found.warning())
                events.emit(self.ws, team, "model_deprecated", model=used,
                            retires=found.retires)

    def end_orphan(self, team: str, name: str, proc: psutil.Process, now: float) -> None:
        """A live process of the member that is not our child: an earlier supervisor's,
        normally dying of its parent-death signal already. Nothing new is forked for the
        member until it is gone; it gets SIGTERM at once and SIGKILL after stop_timeout.
        psutil re-checks the start time before each signal: a reused pid is never hit."""
        key = (proc.pid, proc.create_time())
        try:
            if key not in self.orphans:
                self.orphans[key] = now
                log.warning("%s/%s: pid %d of an earlier supervisor is still running: "
                            "SIGTERM", team, name, proc.pid)
                proc.terminate()
            elif now - self.orphans[key] >= self.conf.stop_timeout:
                log.warning("%s/%s: pid %d ignored SIGTERM for %gs: SIGKILL", team, name,
                            proc.pid, self.conf.stop_timeout)
                proc.kill()
        except psutil.Error:
            pass
        self.wake_in(WAIT_LIVE_INTERVAL)

    def wake_in(self, seconds: float) -> None:
        at = time.time() + max(0.0, seconds)
        self.wake_at = at if self.wake_at is None else min(self.wake_at, at)

    def mark(self, team: str, name: str, status: str) -> None:
        """Write `status` for a member with no process. A `shutdown` is re-checked against
        `desired` under the roster lock: the reconcile's snapshot may predate a `restart`
        that wants the member running again, which must not be undone."""
        applied = False

        def change(m: Json, config: Json) -> tuple[str, str] | None:
            nonlocal applied
            if status == "shutdown" and m["desired"] != "stopped":
                return None
            applied = True
            return roster.set_status(m, status)

        moved = roster.update_member(self.ws, team, name, change)
        if not applied:
            return
        events.status_changed(self.ws, team, name, moved)
        if status == "shutdown":
            actions.release_tasks(self.ws, team, name)

    def status_line(self) -> str:
        counts: dict[str, int] = {}
        for team in self.ws.team_names():
            config: Json | None
            try:
                config = roster.load(self.ws, team)
            except Exception:
                config = self.rosters.get(team)  # the last good copy
            for m in (config or {}).get("members", []):
                counts[m["status"]] = counts.get(m["status"], 0) + 1
        return format_status(counts)

    def update_status(self) -> None:
        line = self.status_line()
        if line != self.last_status:
            self.last_status = line
            self.notifier.status(line)

    # -- processes -----------------------------------------------------------------------
    def spawn_worker(self, team: str, name: str, reset: bool = False) -> None:
        """Fork a teammate; record its pid in the roster; only then let it run.

        A fork that cannot be recorded for want of space is stopped (it sees its go pipe
        close) and the member held back (`hold_for_space`): never a fork loop, and never a
        crash counted toward `restart_limit`."""
        held = self.no_space.get((team, name))
        if held is not None and time.time() < held[0]:
            self.wake_in(held[0] - time.time())
            return
        fds = spare_fds()
        if fds is not None and fds[0] < FD_HEADROOM:
            # a fork it could not record would be stopped and tried again at once: fork
            # only what it can serve, and say why not
            delay = self.hold_for_space(team, name)
            why = (f"teamd is short of file descriptors ({fds[0]} free of RLIMIT_NOFILE "
                   f"{fds[1]}): not starting it; trying again in {delay:g} s")
            log.error("%s/%s: %s", team, name, why)
            self.note_error(team, name, why)
            return
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
        # i10: without inotify of its own teamd could not poke: the member watches itself
        pipe = None if self._watcher is None or self._watcher.polling else wake_mod.open_pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            os.close(go_w)
            self.child_main(team, name, go_r, None if pipe is None else pipe[0])
        os.close(go_r)
        if pipe is not None:
            os.close(pipe[0])
        try:
            create_time = psutil.Process(pid).create_time()
        except psutil.Error:
            create_time = time.time()
        child = Child(team, name, pid, create_time, time.time(),
                      wake_w=None if pipe is None else pipe[1])
        self.children[pid] = child

        def record(m: Json, config: Json) -> tuple[str, str] | None:
            if m["desired"] != "running" or config.get("state") == "deleting":
                return None
            m.update(pid=pid, pid_create_time=create_time, started_at=child.started_at,
                     restart_at=None)
            if reset:
                m["restarts"] = 0
            return roster.set_status(m, "starting") or ("starting", "starting")

        try:
            moved = roster.update_member(self.ws, team, name, record)
        except Exception as exc:
            short = files.out_of_space(exc) or (isinstance(exc, OSError)
                                                 and exc.errno in FD_ERRNOS)
            retry = self.hold_for_space(team, name) if short else None
            log.error("%s/%s: cannot record pid %d: %s%s", team, name, pid, exc,
                      f"; trying again in {retry:g} s" if retry else "")
            moved = None
        if moved is None:
            child.aborted = True  # the child sees its go pipe close and exits
            os.close(go_w)
            return
        try:
            events.emit(self.ws, team, "spawned", member=name, pid=pid)
            events.status_changed(self.ws, team, name, moved)
        except OSError as exc:  # the roster has it: the journal is the lesser loss
            log.error("%s/%s: cannot journal its start: %s", team, name, exc)
        finally:
            os.write(go_w, b"1")
            os.close(go_w)
        log.info("spawned %s/%s pid %d", team, name, pid)

    def note_error(self, team: str, name: str, why: str) -> None:
        """`last_error` of a member with no process, when it can be written."""
        def change(m: Json) -> None:
            if not roster.is_live(m):
                m["last_error"] = why

        try:
            roster.update_status(self.ws, team, name, change)
        except Exception as exc:  # short of what it would take: the log has said it
            log.warning("%s/%s: cannot write last_error: %s", team, name, exc)

    def hold_for_space(self, team: str, name: str) -> float:
        """Hold a member back from forking for a while (1 s doubling to 30 s) after a start
        failed for want of space, or would for want of descriptors; returns the delay. Such
        a start is not a crash."""
        now = time.time()
        held = self.no_space.get((team, name))
        recent = held is not None and now - held[0] < 2 * SPACE_RETRY_MAX
        delay = min(SPACE_RETRY_MAX, held[1] * 2) if held and recent else SPACE_RETRY_FIRST
        self.no_space[(team, name)] = (now + delay, delay)
        self.wake_in(delay)
        return delay

    def child_main(self, team: str, name: str, go_r: int,
                   wake_r: int | None = None) -> None:  # pragma: no cover
        code = EXIT_BOOT_ERROR
        try:
            os.setpgid(0, 0)
            die_with_parent(signal.SIGTERM, self.pid)
            reset_signals()
            redirect_stdio(str(self.ws.member_log(team, name)))
            raise_oom_score_adj()
            close_fds(keep=[go_r] if wake_r is None else [go_r, wake_r])
            scrub_child_env(os.environ)
            wipe_environ_block(NOTIFY_ENV_KEYS)
            if os.read(go_r, 1) != b"1":
                os._exit(EXIT_BOOT_ERROR)  # the supervisor changed its mind
            os.close(go_r)
            from teamd.agent.loop import run_member

            code = run_member(self.ws, team, name, self.conf, wake_fd=wake_r)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:
            traceback.print_exc()
            code = EXIT_NO_SPACE if files.out_of_space(exc) else 1
        finally:
            try:
                logging.shutdown()
            finally:
                os._exit(code)

    def let_leave(self, child: Child) -> None:
        """The member approved its shutdown and is exiting 0 by itself: no SIGTERM, but
        the usual SIGKILL if it is still here after stop_timeout."""
        if child.term_sent_at is None:
            child.term_sent_at = time.time()

    def kill_worker(self, child: Child, sig: int) -> None:
        if sig == signal.SIGTERM and child.term_sent_at is not None:
            return  # already asked; murder_workers escalates
        try:
            os.kill(child.pid, sig)  # our own unreaped child: its pid cannot be reused yet
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            child.term_sent_at = time.time()
        log.info("sent %s to %s/%s pid %d", signal.Signals(sig).name, child.team, child.name,
                 child.pid)

    def reap_workers(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            child = self.children.pop(pid, None)
            if child is not None:
                wake_mod.close(child.wake_w)
                self.record_exit(child, *decode_wait_status(status))
        self.kill_strays()

    def record_exit(self, child: Child, code: int | None, sig: int | None) -> None:
        """`on_exit`, surviving what it cannot write (a full disk): the supervisor goes on,
        and the next reconcile sees the member's process gone."""
        try:
            self.on_exit(child, code, sig)
        except Exception:
            log.exception("%s/%s: cannot record its exit", child.team, child.name)

    def kill_strays(self) -> None:
        """Kill what dead teammates left behind (their tools' process groups), which the
        subreaper flag made our children."""
        try:
            kids = psutil.Process(self.pid).children()
        except psutil.Error:
            return
        for proc in kids:
            if proc.pid in self.children:
                continue
            try:
                pgid = os.getpgid(proc.pid)
                if pgid != os.getpgid(0) and pgid not in self.children:
                    os.killpg(pgid, signal.SIGKILL)
                else:
                    os.kill(proc.pid, signal.SIGKILL)
                log.info("killed stray process %d (%s)", proc.pid, proc.name())
            except (OSError, psutil.Error):
                continue

    def on_exit(self, child: Child, code: int | None, sig: int | None) -> None:
        now = time.time()
        team, name = child.key
        log.info("%s/%s pid %d exited: %s", team, name, child.pid, describe_exit(code, sig))
        if not self.ws.team_exists(team):
            return
        history = self.crashes.setdefault(child.key, policy.CrashHistory())
        outcome: dict[str, Any] = {}

        def change(m: Json, config: Json) -> None:
            if m.get("pid") not in (None, child.pid) and not child.aborted:
                return
            if child.aborted:
                return
            m["last_exit"] = {"code": code, "signal": sig, "at": now}
            if child.restarting and not self.stopping:
                new = "pending"
                history.reset()
                m["restarts"] = 0
            else:
                new = policy.status_after_exit(code if sig is None else None, m["desired"],
                                               self.stopping)
            if new == "backoff" and code == EXIT_NO_SPACE and sig is None:
                # stopped for want of space: retried with back-off, never counted
                outcome["delay"] = self.hold_for_space(team, name)
                m["restart_at"] = now + outcome["delay"]
                m["last_error"] = (f"stopped for want of space (see its log); starting again "
                                   f"in {outcome['delay']:g} s")
            elif new == "backoff":
                history.record(now, now - child.started_at, self.conf)
                m["restarts"] = int(m.get("restarts") or 0) + 1
                if history.over_limit(self.conf):
                    new = "failed"
                    outcome["reason"] = (f"{describe_exit(code, sig)}; {m['restarts']} "
                                         f"restarts within {self.conf.restart_window:g}s")
                    m["last_error"] = outcome["reason"]
                else:
                    outcome["delay"] = history.delay(self.conf)
                    m["restart_at"] = now + outcome["delay"]
                    outcome["restarts"] = m["restarts"]
                    # the roster, not only the lead's inbox, says why (CONTRACT §4)
                    m["last_error"] = (f"{describe_exit(code, sig)}; restart "
                                       f"{m['restarts']} in {outcome['delay']:g} s")
            outcome["moved"] = roster.set_status(m, new)
            outcome["kind"] = m.get("kind", "teammate")
            outcome["status"] = new
            outcome["restarts"] = m["restarts"]
            events.emit(self.ws, team, "exited", member=name, code=code, signal=sig)

        try:
            roster.update_member(self.ws, team, name, change)
        except Exception:
            log.exception("%s/%s: cannot record its exit", team, name)
            return
        if not outcome:
            return
        events.status_changed(self.ws, team, name, outcome["moved"])
        status = outcome["status"]
        if status == "backoff":
            events.emit(self.ws, team, "restart_scheduled", member=name,
                        delay=outcome["delay"], restarts=outcome["restarts"])
            self.wake_in(outcome["delay"])
        elif status in ("shutdown", "failed"):
            actions.release_tasks(self.ws, team, name)
        if status == "failed":
            reason = outcome["reason"]
            events.emit(self.ws, team, "member_failed", member=name, reason=reason)
            # the lead hears of a failed member; of the LLM lead itself, the person does
            told = USER if outcome["kind"] == "lead" else LEAD
            msg = inbox.make("member_failed", SUPERVISOR, told,
                             f"{name} failed and will not be restarted ({reason}); "
                             f"`teamctl restart {team} {name}` starts it again",
                             member=name, reason=reason)
            inbox.deliver(self.ws, team, [msg])
            log.error("%s/%s failed: %s", team, name, reason)

    # -- stopping ------------------------------------------------------------------------
    def stop_all(self) -> None:
        """SIGTERM every teammate, SIGKILL what remains after stop_timeout, reap, exit."""
        self.stopping = True
        self.notifier.stopping()
        for team in self.ws.team_names():
            events.emit(self.ws, team, "supervisor_stopping", pid=self.pid)
        for child in list(self.children.values()):
            self.kill_worker(child, signal.SIGTERM)
        deadline = time.time() + self.conf.stop_timeout
        while self.children and time.time() < deadline:
            self.reap_workers()
            if self.children:
                self.wait_for_signal(min(0.5, deadline - time.time()))
        for child in list(self.children.values()):
            self.kill_worker(child, signal.SIGKILL)
        for pid in list(self.children):
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
            child = self.children.pop(pid)
            wake_mod.close(child.wake_w)
            self.record_exit(child, *decode_wait_status(status))
        self.kill_strays()
        try:
            self.ws.supervisor_info.unlink()
        except FileNotFoundError:
            pass
        if self._lock is not None:
            self._lock.release()
        log.info("stopped")

    def wait_for_signal(self, timeout: float) -> None:
        assert self._pipe is not None
        try:
            select.select([self._pipe[0]], [], [], max(0.0, timeout))
        except InterruptedError:
            pass
        drain_fd(self._pipe[0])
        self.sig_queue.clear()
