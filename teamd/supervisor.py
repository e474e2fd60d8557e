"""`teamd run`: keep the roster true with real processes.

The arbiter, after gunicorn's: signal handlers only enqueue (and wake the loop through the
wakeup fd); the main loop dispatches `handle_<signal>`, reconciles the roster's `desired`
state with the member processes when inotify says a file that matters changed, and runs
timers (SIGKILL after `stop_timeout`, backoff restarts, the systemd watchdog, the sweep for
strays). What to do for a member and what an exit means are `policy`'s (`decide`,
`after_exit`); forking and ending processes are `processes`'. The waiting (signals,
inotify, timers) is `wakeups`', reaping and recording exits and the stop of everything
`exits`'. Every teammate is forked from this single-threaded parent after the heavy
modules are imported once (`model.preload`).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from teamd import (
    __version__,
    actions,
    events,
    inbox,
    journal_gaps,
    pidfile,
    policy,
    repair,
    roster,
    roster_cache,
    shared_tables,
    troubles,
)
from teamd import assign as assign_mod
from teamd import settings as settings_mod
from teamd import wake as wake_mod
from teamd.deprecations import journal_deprecated
from teamd.errors import BadInput, TeamdError
from teamd.exits import Exits
from teamd.files import Json
from teamd.holds import Holds, short_of_room
from teamd.hosting import Hosting
from teamd.hosts import Host
from teamd.layout import Workspace
from teamd.model_limits import cap_warning
from teamd.notify import Notifier, format_status
from teamd.paging import Pager
from teamd.policy import Verb
from teamd.proc import become_subreaper
from teamd.processes import (
    FD_HEADROOM,
    Ladder,
    MemberProcess,
    Orphan,
    fork_process,
    spare_fds,
)
from teamd.states import Desired, Status, Writer, transition
from teamd.store import Feed
from teamd.store.errors import LeaseLost, StoreUnreachable
from teamd.troubles import Troubles
from teamd.wakeups import SAFETY_INTERVAL, SUPERVISED

log = logging.getLogger(__name__)

WAIT_LIVE_INTERVAL = 0.2  # re-check while a previous supervisor's process winds down


class Supervisor(Exits, Hosting):
    """`teamd run`'s loop; its waits are `Wakeups`', its reaping and stopping `Exits`'."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.conf = settings_mod.load(ws)
        # teamd.toml's [permissions], [hooks], [prices] as last read: a SIGHUP writes them
        # into a store that shares them only once they changed (`shared_tables.reload`)
        self.own_tables = shared_tables.document(settings_mod.file_table(ws))
        events.use_settings(ws, self.conf)
        self.pid = os.getpid()
        self.processes: dict[int, MemberProcess] = {}  # pid → the member process we forked
        self.ladder = Ladder()  # what we are ending: SIGTERM, then SIGKILL after stop_timeout
        self.crashes: dict[tuple[str, str], policy.CrashHistory] = {}
        self.holds = Holds(ws, self.update_member, self.wake_in)  # held for want of room
        self.models_checked: set[tuple[str, str]] = set()  # (team, model) since this start
        self.rosters: dict[str, Json] = {}  # each team's last roster that parsed
        self.troubles = Troubles(ws)  # teamd's own errors, journaled as supervisor_error
        self.pager = Pager(ws)  # the person_needed hook
        self.sig_queue: list[int] = []
        self.stopping = False
        self.notifier = Notifier.from_env()
        self.watchdog_every = self.notifier.watchdog_interval()
        self.next_watchdog = 0.0
        self.next_sweep = 0.0  # the next look for strays we adopted (`end_strays`)
        self.last_status = ""
        self.wake_at: float | None = None
        self._pipe: tuple[int, int] | None = None
        self.feed: Feed | None = None
        self._lock: Any = None
        # assignment state per team, and the teams whose roster or spend changed
        self.boards = assign_mod.Boards(ws)
        self.roster_touched: set[str] = set()
        # each team's roster as last read, re-read only where inotify named a change
        self.views: dict[str, roster_cache.Cached] = {}
        self.repairs = repair.Repairs(ws, self.update_member)  # a roster that lies, put right
        self.host: Host | None = None  # this machine's host, when the store has hosts
        self.hosts_seen: dict[str, Json] = {}

    # -- life cycle ----------------------------------------------------------------------
    def run(self) -> int:
        from teamd.agent import model  # here: teamctl, which imports this module, never does

        self._lock = pidfile.claim(self.ws, __version__)
        if self.ws.store.supports_hosts:  # CONTRACT §15: this machine's host, its lease
            self.host = Host(self.ws, self.conf, self._lock)
        model.preload()
        self.init_signals()
        become_subreaper()
        self.feed = self.ws.store.changes(kinds=SUPERVISED)
        for team in self.ws.store.team_names():
            journal_gaps.mend_creation(self.ws, team)  # before any line of its own there
            events.emit(self.ws, team, "supervisor_started", pid=self.pid)
            journal_gaps.mend_team(self.ws, team)  # a move whose writer died before its line
        log.info("teamd %s supervising %s (pid %d)", __version__, self.ws.root, self.pid)
        self.reconcile()
        self.notifier.ready(self.status_line())
        try:
            while not self.stopping:
                dirty = self.sleep()
                try:
                    self.dispatch_signals()
                    if self.stopping:
                        break
                    self.run_timers()
                    if dirty:
                        self.reconcile()
                except LeaseLost as exc:  # another host may be starting our members
                    self.lose_lease(exc)
                except StoreUnreachable as exc:  # the heartbeat decides when it is too long
                    log.error("%s; trying again", exc)
                    self.wake_in(1.0)
        finally:
            try:
                self.stop_all()
            except LeaseLost as exc:  # lost while stopping: end them all the same way
                self.lose_lease(exc, rejoin=False)
        return 0

    def handle_chld(self) -> None:
        self.reap_processes()

    def handle_term(self) -> None:
        log.info("stopping: the team keeps its desired state; members resume next start")
        self.stopping = True

    handle_int = handle_term

    def handle_hup(self) -> None:
        """Re-read teamd.toml, and write its tables into a store that shares them; a
        broken one keeps the settings in force (a typo: not down) and writes nothing."""
        self.notifier.reloading()
        try:
            self.conf, self.own_tables = shared_tables.reload(self.ws, self.own_tables)
            events.use_settings(self.ws, self.conf)
            self.roster_touched.update(self.ws.store.team_names())  # a new price frees the paused
            log.info("re-read %s", self.ws.settings_file)
        except TeamdError as exc:
            log.error("%s; keeping the settings in force", exc)
            self.troubles.report_all(self.ws.store.team_names(), troubles.SETTINGS,
                                     f"teamd.toml not reloaded, the settings in force kept: {exc}")
        else:
            self.troubles.clear_all(troubles.SETTINGS)
        self.notifier.ready(self.status_line())

    # -- timers --------------------------------------------------------------------------
    def run_timers(self) -> None:
        now = time.time()
        if self.watchdog_every and now >= self.next_watchdog:
            self.notifier.watchdog()
            self.next_watchdog = now + self.watchdog_every
        self.ladder.escalate(now, self.conf.stop_timeout)  # SIGKILL what ignored SIGTERM
        self.run_host_timer(now)  # the heartbeat; the leader's round
        if now >= self.next_sweep:
            # a tool's daemon (its own session, so its group was not killed) is adopted by
            # us when its parent ends; no SIGCHLD says so while the teammate lives on
            self.next_sweep = now + SAFETY_INTERVAL
            self.end_strays()

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self) -> None:
        now = time.time()
        self.conf = shared_tables.refreshed(self.ws.store, self.conf)  # another host's push
        self.wake_at = None
        if self.host is not None and self.host.lost:
            return  # nothing runs here, and nothing is written, until it joins again
        by_member = {p.key: p for p in self.processes.values()}
        for team in self.ws.store.team_names():
            # one team's bad file (a hand-edited task, a missing folder) must not stop the
            # supervisor, and with it every other team
            try:
                config = self.load_roster(team)
                if config is not None and not self.place_members(team, config):
                    self.reconcile_team(team, config, by_member, now)
                    if self.leads():
                        self.pager.check(team, config, self.conf, self.pid)
                self.troubles.clear(team, troubles.RECONCILE)
            except Exception as exc:
                if self.troubles.report(team, troubles.RECONCILE, f"cannot reconcile: {exc}"):
                    log.exception("team %s: cannot reconcile; the other teams go on", team)
        self.update_status()

    def load_roster(self, team: str) -> Json | None:
        """The team's roster; None while its config.json does not parse (a hand edit, a
        truncated copy). Then the last good copy is kept in memory, nothing of the team is
        started or stopped, and the file is left as it is for a person to repair: said once
        in the log, naming the file, and again when it reads again."""
        try:
            view = self.views.get(team)
            if view is None:
                view = self.views[team] = roster_cache.Cached(self.ws, team)
            config = view.load()
        except BadInput:
            raise
        except TeamdError as exc:
            if self.troubles.report(team, troubles.ROSTER, str(exc)):
                good = self.rosters.get(team)
                kept = (f"its last good copy ({len(good['members'])} members)" if good
                        else "no earlier copy")
                log.error("team %s: %s; keeping %s in memory, starting and stopping nothing "
                          "of the team, and leaving the file as it is until it is repaired",
                          team, exc, kept)
            return None
        if self.troubles.clear(team, troubles.ROSTER):
            log.info("team %s: its roster (config.json) reads again", team)
        self.rosters[team] = config
        return config

    def reconcile_team(self, team: str, config: Json,
                       by_member: dict[tuple[str, str], MemberProcess], now: float) -> None:
        """Do for each member of `team` what `policy.decide` says; remove a team being
        deleted once nothing of it runs."""
        deleting = config.get("state") == "deleting"
        members = config["members"]
        self.check_models(team, members)
        live = {m["name"] for m in members if (team, m["name"]) in by_member
                or (self.may_run(m) and roster.is_live(m))}
        wake: list[str] = []
        # a teammate idle for less than wake.SETTLE may still send its idle notice:
        # the lead's quiet rule counts it as at work until then
        settling, settled_in = self.boards.settling(team, members, now)
        if settling:
            self.wake_in(settled_in)
        quiet_view = [dict(m, status="active") if m["name"] in settling else m for m in members]
        leads = self.leads()  # with hosts, one of them assigns tasks and removes teams
        if not deleting:
            waiting = {m["name"] for m in members if m["status"] == "sleeping" and self.mine(m)
                       and self.has_waking_mail(team, m, quiet_view, live)}
            sent, due = self.boards.hand_out(  # claims and sends tasks
                team, members, live, waiting, reload=self.feed is None
                or self.feed.polling) if leads else (set(), None)
            waiting |= sent
            if due is not None:
                self.wake_in(due - time.time())
            wake = policy.sleepers_to_wake(members, waiting, live)
        if team in self.roster_touched:  # a paused member, a lead waiting for quiet
            self.roster_touched.discard(team)
            self.poke_members(team, wake_mod.roster_pokes(
                quiet_view, live, lambda name: self.ws.store.has_mail(team, name)))
        for m in members:
            if not self.mine(m):
                continue  # another host's (CONTRACT §15)
            process = by_member.get(key := (team, m["name"]))
            orphan = roster.process_of(m) if process is None and self.may_run(m) else None
            m = self.repairs.amend(team, m, process, orphan is not None)
            action = policy.decide(m, process, now, orphan=orphan is not None,
                                   deleting=deleting, wake=m["name"] in wake,
                                   held_until=self.holds.until(key))
            if process is not None:
                self.stop_process(process, action.verb, now)
            elif orphan is not None and action.verb is Verb.END_ORPHAN:
                self.end_orphan(Orphan(proc=orphan, team=team, name=m["name"]), now)
            else:
                self.start_member(team, m, action, now)
        if deleting and leads and not any(p.team == team for p in self.processes.values()) \
                and not actions.live_members(config):
            actions.remove_team(self.ws, team)
            if self.feed is not None:  # a team created again under this name is new
                self.feed.unwatch(team)
            log.info("team_deleted: %s", team)

    @staticmethod
    def may_run(member: Json) -> bool:
        """Could a process of an earlier supervisor still be running for `member`? Only
        while its status says it runs: `sleeping`, `backoff`, `failed`, `shutdown` and
        `pending` are written once its process has gone. Asking the kernel about the pid of
        each of a thousand sleepers on every reconcile is what this spares."""
        return member["status"] in roster.RUNNING_STATUSES

    def has_waking_mail(self, team: str, member: Json, members: list[Json],
                        live: set[str]) -> bool:
        """Mail that wakes `member` if it sleeps: any, except that idle notifications
        alone wake a sleeping LLM lead only once the team is quiet (CONTRACT §12); the
        roster change that makes it quiet brings the reconcile that wakes it."""
        if not self.ws.store.has_mail(team, member["name"]):
            return False  # a stat, not a read: most of a big team sleeps with no mail
        waiting = inbox.peek(self.ws, team, member["name"])
        if member.get("kind") != "lead" or member["status"] != "sleeping":
            return bool(waiting)
        return policy.mail_wakes_lead(waiting, members, live, self.conf.lead_wake_on_idle)

    def check_models(self, team: str, members: list[Json]) -> None:
        """Once per model per start in each team using it: a `max_tokens` above its output
        limit (teamd's log), deprecated or retired (the log and the journal)."""
        fresh = [m for m in members
                 if (team, m.get("model") or self.conf.model) not in self.models_checked]
        for used in {m.get("model") or self.conf.model for m in fresh}:
            if (capped := cap_warning(used, self.conf.max_tokens)) is not None:
                log.warning("team %s: %s", team, capped)
        journal_deprecated(self.ws, team, fresh, self.conf.model, self.models_checked)

    def start_member(self, team: str, member: Json, action: policy.Action, now: float) -> None:
        """Do `action` for a member with no process: fork one, wait, or mark it."""
        match action.verb:
            case Verb.SPAWN:
                if self.lacks_cwd(team, member):
                    return  # not forked here: handed back to the leader (CONTRACT §15)
                if action.reset:
                    self.crashes.pop((team, member["name"]), None)  # a restart: count afresh
                self.spawn_process(team, member["name"], reset=action.reset)
            case Verb.WAIT:
                self.wake_in((action.at or now) - now)
            case Verb.MARK:
                self.mark(team, member["name"], action.status or member["status"])

    def end_orphan(self, orphan: Orphan, now: float) -> None:
        """A live process of the member that is not ours: an earlier supervisor's. Nothing
        new is forked for the member until it is gone (looked at again shortly)."""
        self.ladder.terminate(orphan, now, warning="of an earlier supervisor is still running")
        self.wake_in(WAIT_LIVE_INTERVAL)

    def mark(self, team: str, name: str, status: Status) -> None:
        """Write `status` for a member with no process. A `shutdown` is re-checked against
        `desired` under the roster lock: the reconcile's snapshot may predate a `restart`
        that wants the member running again, which must not be undone."""
        def change(m: Json, config: Json) -> bool:  # written (and its move journaled)
            if status == Status.SHUTDOWN and m["desired"] != Desired.STOPPED:
                return False
            transition(m, status, Writer.TEAMD)
            return True

        if not self.update_member(team, name, change):
            return
        if status == "shutdown":
            self.release_tasks(team, name)

    def status_line(self) -> str:
        counts: dict[str, int] = {}
        for team in self.ws.store.team_names():
            # as the last reconcile read it (or the last good copy): a reread of every
            # member's file for a status line would cost what the cached roster saves
            config: Json | None = self.rosters.get(team)
            for m in (config or {}).get("members", []):
                counts[m["status"]] = counts.get(m["status"], 0) + 1
        return format_status(counts)

    def update_status(self) -> None:
        line = self.status_line()
        if line != self.last_status:
            self.last_status = line
            self.notifier.status(line)

    # -- processes -----------------------------------------------------------------------
    def spawn_process(self, team: str, name: str, reset: bool = False) -> None:
        """Fork a member's process; record its pid in the roster; only then let it run.

        A fork that cannot be recorded (its pid, its start in the journal) for want of
        space is stopped (it sees its go pipe close) and the member held back (`Holds`):
        never a fork loop, and never a crash counted toward `restart_limit`."""
        fds = spare_fds()
        if fds is not None and fds[0] < FD_HEADROOM:
            # a fork it could not record would be stopped and tried again at once: fork
            # only what it can serve, and say why not
            delay = self.holds.hold(team, name)
            why = (f"teamd is short of file descriptors ({fds[0]} free of RLIMIT_NOFILE "
                   f"{fds[1]}): not starting it; trying again in {delay:g} s")
            log.error("%s/%s: %s", team, name, why)
            self.holds.note(team, name, why)
            return
        # without inotify teamd cannot poke: the member then watches for itself (loudly)
        process = fork_process(self.ws, team, name, self.conf, self.pid, wake_pipe=not (
            self.feed is None or self.feed.polling))
        self.processes[process.pid] = process

        def record(m: Json, config: Json) -> bool:  # recorded (and its move journaled)
            if m["desired"] != Desired.RUNNING or config.get("state") == "deleting":
                return False
            m.update(pid=process.pid, pid_create_time=process.create_time,
                     started_at=process.started_at, restart_at=None)
            if reset:
                m["restarts"] = 0
            transition(m, Status.STARTING, Writer.TEAMD)
            return True

        recorded: bool | None = None
        try:
            recorded = self.update_member(team, name, record)
            if recorded:  # a child let run with no room to write would only die
                events.emit(self.ws, team, "spawned", member=name, pid=process.pid)
        except Exception as exc:
            if short_of_room(exc):
                self.holds.refuse(process, exc)
                return
            # other trouble: with its pid recorded, the journal is the lesser loss
            log.error("%s/%s: cannot %s: %s", team, name, "journal its start"
                      if recorded else f"record pid {process.pid}", exc)
        if not recorded:
            process.abort()
            return
        process.go()
        log.info("spawned %s/%s pid %d", team, name, process.pid)

    def stop_process(self, process: MemberProcess, verb: Verb, now: float) -> None:
        """Do `verb` for a member's process: SIGTERM it (SIGKILL after stop_timeout) to
        stop or restart it; for one that leaves by itself, only the clock to SIGKILL."""
        match verb:
            case Verb.STOP:
                self.ladder.terminate(process, now)
            case Verb.RESTART:
                process.restarting = True
                self.ladder.terminate(process, now)
            case Verb.LET_LEAVE:
                self.ladder.terminate(process, now, signal_it=False)

