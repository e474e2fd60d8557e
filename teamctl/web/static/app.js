// teamctl web: renders the JSON of /api/… into the page, live. Every value is set as text
// (textContent, text nodes): nothing a model, a message, a task or a file holds is ever
// parsed as HTML. No framework, no build step, no outside asset.
"use strict";

const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#137f8f", "#a86b00", "#9b3fb5", "#1f8a4c", "#3a7bd5", "#c0392b", "#555"];
const FOLD_LINES = 4, FOLD_CHARS = 400;  // longer tool output is folded

// -- building elements (text only) ------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "className") node.className = value;
    else if (key === "style") Object.assign(node.style, value);  // CSSOM: allowed by the CSP
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function clock(ts) {
  if (!ts) return "";
  return new Date(ts * 1000).toLocaleTimeString([], {hour12: false});
}
function badge(status, shown) {
  return el("span", {className: `badge s-${status}`, title: `status: ${status}`}, shown || status);
}
function bar(spent, budget) {
  if (!budget) return null;
  const share = Math.min(1, (spent || 0) / budget);
  return el("span", {className: "bar" + (spent >= budget ? " over" : ""),
                     title: `${Math.round(share * 100)}% of the budget`},
            el("span", {style: {width: `${(share * 100).toFixed(1)}%`}}));
}
function replace(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
}

// -- talking to the server ----------------------------------------------------------------
async function getJSON(url) {
  const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
  const body = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}
function flash(text, isError) {
  const box = document.getElementById("flash");
  box.textContent = text;
  box.className = isError ? "error" : "";
  box.hidden = false;
}
async function act(team, payload, done) {
  flash(`${payload.action}: working…`, false);
  try {
    const response = await fetch(`/api/t/${encodeURIComponent(team)}/act`, {
      method: "POST", credentials: "same-origin",
      headers: {"content-type": "application/json", "x-csrf-token": CSRF},
      body: JSON.stringify(payload)});
    const body = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    flash(`${payload.action}: done — ${summary(payload.action, body.result)}`, false);
    if (done) done(body.result);
    refresh();
  } catch (error) {
    flash(`${payload.action}: refused — ${error.message}`, true);
  }
}
function summary(action, result) {
  if (!result || typeof result !== "object") return "ok";
  if (result.id && result.subject) return `task #${result.id}: ${result.subject}`;
  if (result.type && result.recipient) return `${result.type} to ${result.recipient}`;
  if (result.request && result.request.request_id) {
    return `request ${result.request.request_id}` + (result.answered ? " (answered)" : "");
  }
  if ("budget_usd" in result) return `budget ${result.budget_usd ?? "none"}`;
  if (result.restarted) return `restart of ${result.restarted.join(", ") || "nobody"}`;
  return "ok";
}
function formOf(fields, submit) {
  // a form whose submit hands {name: value} of its fields to `submit`
  const form = el("form", {className: "inline"}, ...fields);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = {};
    for (const input of form.querySelectorAll("[name]")) {
      values[input.name] = input.type === "checkbox" ? input.checked : input.value;
    }
    submit(values, form);
  });
  return form;
}

// -- where we are -------------------------------------------------------------------------
const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
const route = parts[0] === "t" && parts.length === 2 ? {page: "team", team: parts[1]}
  : parts[0] === "t" && parts[2] === "m" && parts.length === 4
    ? {page: "member", team: parts[1], name: parts[3]}
    : {page: "teams"};
const main = document.getElementById("main");
const view = {};  // the page's parts, built once; data parts re-rendered
let loading = false, dirty = false;

function crumbs() {
  const nav = document.getElementById("crumbs");
  const bits = [el("a", {href: "/"}, "teams")];
  if (route.team) bits.push(" / ", el("a", {href: `/t/${encodeURIComponent(route.team)}`}, route.team));
  if (route.name) bits.push(" / ", route.name);
  replace(nav, bits);
  document.title = ["teamd", route.team, route.name].filter(Boolean).join(" · ");
}

async function refresh() {
  if (loading) { dirty = true; return; }
  loading = true;
  try {
    do {
      dirty = false;
      if (route.page === "teams") renderTeams(await getJSON("/api/teams"));
      else if (route.page === "team") renderTeam(await getJSON(teamURL()));
      else renderMember(await getJSON(
        `/api/t/${encodeURIComponent(route.team)}/m/${encodeURIComponent(route.name)}`));
      main.dataset.loaded = String(Date.now());
    } while (dirty);
  } catch (error) {
    replace(main, el("section", {}, el("h1", {}, "Cannot show this page"),
                     el("p", {className: "err"}, error.message)));
    view.built = false;
  } finally {
    loading = false;
  }
}

// -- / : every team --------------------------------------------------------------------------
function renderTeams(doc) {
  const cards = doc.teams.map((team) => {
    const byStatus = {};
    for (const m of team.members) byStatus[m.status] = (byStatus[m.status] || 0) + 1;
    return el("section", {className: "team-card", "data-team": team.name},
      el("h2", {}, el("a", {href: `/t/${encodeURIComponent(team.name)}`}, team.name), " ",
         el("span", {className: "muted small"}, `(${team.state})`)),
      team.description ? el("p", {className: "muted"}, team.description) : null,
      el("p", {}, "members: ", Object.keys(byStatus).length
        ? Object.entries(byStatus).flatMap(([s, n]) => [badge(s, `${n} ${s}`), " "])
        : el("span", {className: "muted"}, "none")),
      el("p", {}, `tasks: ${team.tasks.pending} pending, ${team.tasks.in_progress} in progress, `
                  + `${team.tasks.completed} completed`),
      el("p", {}, "spent: ", bar(team.spent_usd, team.budget_usd), team.spent_shown,
         team.budget_usd ? ` of ${team.budget_shown}` : " (no budget)"),
      team.supervisor_error ? el("p", {className: "err"}, `teamd error: ${team.supervisor_error.reason}`) : null);
  });
  const unreadable = (doc.unreadable || []).map((bad) =>
    el("section", {}, el("h2", {}, bad.name), el("p", {className: "err"}, `cannot be read: ${bad.error}`)));
  replace(main, el("h1", {}, "Teams"), supervisorLine(doc.supervisor),
          cards.length || unreadable.length ? el("div", {className: "grid"}, cards, unreadable)
            : el("p", {className: "muted"}, "No teams yet (teamctl create TEAM)."));
}
function supervisorLine(sup) {
  if (!sup) return el("p", {className: "note"}, "No supervisor is running (teamd run): statuses may be stale.");
  return el("p", {className: "muted small"}, `supervisor pid ${sup.pid}`
            + (sup.api_key_set === false ? " — it has no API key" : ""));
}

// -- /t/TEAM : one team ------------------------------------------------------------------
function teamURL() {
  const query = new URLSearchParams();
  if (view.filterMember && view.filterMember.value) query.set("member", view.filterMember.value);
  if (view.filterEvent && view.filterEvent.value) query.set("event", view.filterEvent.value);
  const q = query.toString();
  return `/api/t/${encodeURIComponent(route.team)}` + (q ? `?${q}` : "");
}
function buildTeam() {
  const team = route.team;
  view.head = el("div");
  view.roster = el("div", {className: "scroll"});
  view.requests = el("div");
  view.board = el("div", {className: "board"});
  view.chart = el("div");
  view.journal = el("div", {className: "journal"});
  view.filterMember = el("select", {name: "member", onchange: refresh}, el("option", {value: ""}, "every member"));
  view.filterEvent = el("select", {name: "event", onchange: refresh}, el("option", {value: ""}, "every event"));
  view.sendTo = el("select", {name: "to"});
  view.ownerList = el("datalist", {id: "members"});
  const send = formOf([view.sendTo, el("input", {name: "content", placeholder: "message", size: 40, required: true}),
                       el("button", {type: "submit"}, "Send")],
    (v, form) => act(team, {action: "send", to: v.to, content: v.content}, () => form.reset()));
  const add = formOf([el("input", {name: "subject", placeholder: "subject", size: 28, required: true}),
                      el("input", {name: "description", placeholder: "description", size: 20}),
                      el("input", {name: "blocked_by", placeholder: "blocked by 1,2", size: 10}),
                      el("input", {name: "owner", placeholder: "owner", size: 10, list: "members"}),
                      el("button", {type: "submit"}, "Add task")],
    (v, form) => act(team, {action: "task_add", ...v}, () => form.reset()));
  const update = formOf([el("input", {name: "task_id", placeholder: "task #", size: 5, required: true}),
                         el("select", {name: "status"}, ["", "pending", "in_progress", "completed"].map(
                           (s) => el("option", {value: s}, s || "status…"))),
                         el("input", {name: "owner", placeholder: "owner ('-' clears)", size: 14, list: "members"}),
                         el("input", {name: "blocked_by", placeholder: "+ blocked by", size: 10}),
                         el("button", {type: "submit"}, "Update task")],
    (v) => act(team, {action: "task_update", task_id: v.task_id, status: v.status || null,
                      owner: v.owner === "" ? null : v.owner === "-" ? "" : v.owner,
                      blocked_by: v.blocked_by || null}));
  const budget = formOf([el("input", {name: "usd", placeholder: "USD (0 removes)", size: 12, required: true}),
                         el("input", {name: "member", placeholder: "member (none: the team)", size: 18, list: "members"}),
                         el("button", {type: "submit"}, "Set budget")],
    (v) => act(team, {action: "budget", usd: v.usd, member: v.member || null}));
  replace(main, view.head,
    el("section", {}, el("h2", {}, "Roster"), view.roster),
    el("div", {className: "cols"},
      el("div", {},
        el("section", {}, el("h2", {}, "Board"), view.board),
        el("section", {}, el("h2", {}, "Spend over time"), view.chart)),
      el("div", {},
        el("section", {id: "requests"}, el("h2", {}, "Pending requests"), view.requests),
        el("section", {id: "act"}, el("h2", {}, "Act"),
           el("h3", {}, "Send a message"), send, el("h3", {}, "Add a task"), add,
           el("h3", {}, "Update a task"), update, el("h3", {}, "Set a budget"), budget,
           view.ownerList),
        el("section", {}, el("h2", {}, "Journal"),
           el("div", {className: "actions"}, view.filterMember, view.filterEvent), view.journal))));
  view.built = true;
}
function keepOptions(select, values, label) {
  const chosen = select.value;
  const have = [...select.options].map((o) => o.value);
  const want = [...new Set([...values, chosen].filter(Boolean))];
  if (have.slice(have[0] === "" ? 1 : 0).join("\n") === want.join("\n")) return;
  const first = have[0] === "" ? [el("option", {value: ""}, label)] : [];
  replace(select, first, want.map((v) => el("option", {value: v}, v)));
  if (chosen || first.length) select.value = chosen;
}
function renderTeam(doc) {
  if (!view.built) buildTeam();
  const t = doc.team, team = route.team;
  replace(view.head, el("h1", {}, `Team ${t.name} `, el("span", {className: "muted small"}, `(${t.state})`)),
    el("p", {}, `tasks: ${t.tasks.pending} pending, ${t.tasks.in_progress} in progress, ${t.tasks.completed} completed`
       + " · spent ", bar(t.spent_usd, t.budget_usd), t.spent_shown,
       t.budget_usd ? ` of ${t.budget_shown}` : " (no budget)"),
    supervisorLine(doc.supervisor),
    t.supervisor_error ? el("p", {className: "err"}, `teamd error: ${t.supervisor_error.reason}`) : null);
  // roster
  const branches = t.members.some((m) => m.branch);  // as `teamctl status`: only in git worktrees
  const heads = ["NAME (RUNTIME @ HOST)", "STATUS", "TASK", "UPTIME", "CPU%", "PSS", "TOKENS", "COST",
                 "RESTARTS", branches ? "BRANCH" : null, "NOTES", "LAST ERROR", ""].filter((h) => h !== null);
  const rows = t.members.map((m) => {
    const c = m.cells, cost = (m.usage || {}).cost_usd || 0;
    return el("tr", {"data-member": m.name},
      el("td", {}, el("a", {href: `/t/${encodeURIComponent(team)}/m/${encodeURIComponent(m.name)}`}, m.name),
         el("div", {className: "muted small"}, (m.runtime || "teamd") + (m.host ? ` @ ${m.host}` : ""))),
      el("td", {}, badge(m.status, c.STATUS)), el("td", {}, c.TASK), el("td", {}, c.UPTIME),
      el("td", {}, c["CPU%"]), el("td", {}, c.PSS), el("td", {}, c.TOKENS),
      el("td", {}, bar(cost, m.budget_usd), c.COST), el("td", {}, c.RESTARTS), branches ? el("td", {}, c.BRANCH) : null,
      el("td", {className: c.NOTES ? "wrap note" : ""}, c.NOTES),
      el("td", {className: c["LAST ERROR"] ? "wrap err" : ""}, c["LAST ERROR"]),
      el("td", {}, memberActions(team, m.name)));
  });
  replace(view.roster, rows.length ? el("table", {}, el("tr", {}, heads.map((h) => el("th", {}, h))), rows)
    : el("p", {className: "muted"}, "No members (teamctl spawn)."));
  const names = t.members.map((m) => m.name);
  keepOptions(view.sendTo, [...names, "lead"].filter((v, i, a) => a.indexOf(v) === i), null);
  replace(view.ownerList, names.map((n) => el("option", {value: n})));
  keepOptions(view.filterMember, names, "every member");
  keepOptions(view.filterEvent, [...new Set(["status", "message", "task_created", "task_updated",
    "tool_call", "model_call", ...doc.journal.map((e) => e.event)])].filter(Boolean).sort(), "every event");
  renderRequests(doc.requests);
  renderBoard(doc.board);
  renderChart(doc.spend);
  replace(view.journal, doc.journal.length ? doc.journal.map((e) =>
    el("div", {"data-event": e.event}, el("span", {className: "muted"}, `${clock(e.ts)} `),
       `${e.member || "-"} `, e.text)) : el("p", {className: "muted"}, "Nothing journaled yet."));
}
function memberActions(team, name) {
  // one compact menu per roster row: shut down (the handshake), stop, restart, remove
  const choices = [["", "act…"], ["shutdown", "shut down"], ["stop", "stop (no handshake)"],
                   ["restart", "restart"], ["remove", "remove from the team"]];
  const menu = el("select", {"aria-label": `act on ${name}`, name: "member-action"},
                  choices.map(([value, label]) => el("option", {value}, label)));
  menu.addEventListener("change", () => {
    const action = menu.value;
    menu.value = "";
    if (!action) return;
    if ((action === "stop" || action === "remove") && !confirm(`${action} ${name}?`)) return;
    act(team, {action, name});
  });
  return menu;
}
function renderRequests(records) {
  const team = route.team;
  replace(view.requests, records.length ? records.map((r) => {
    const what = r.kind === "permission" ? r.detail : r.kind === "plan_approval" ? r.plan : (r.reason || "-");
    // what the person typed or ticked survives a live refresh (the box is drawn anew)
    view.feedback = view.feedback || {};
    view.always = view.always || {};
    const feedback = el("input", {name: "feedback", placeholder: "feedback (needed to reject)", size: 30,
                                  oninput: (e) => { view.feedback[r.request_id] = e.target.value; }});
    feedback.value = view.feedback[r.request_id] || "";
    const always = el("input", {type: "checkbox", name: "always",
                                onchange: (e) => { view.always[r.request_id] = e.target.checked; }});
    always.checked = Boolean(view.always[r.request_id]);
    const answer = (approve) => () => act(team, {action: approve ? "approve" : "reject",
      request_id: r.request_id, feedback: feedback.value || null, always: approve && always.checked});
    const answerable = r.kind !== "shutdown";
    return el("div", {className: "request", "data-request": r.request_id},
      el("div", {}, el("strong", {}, r.kind), ` from ${r.sender} to ${r.recipient} · `,
         el("span", {className: "muted small"}, r.request_id)),
      el("pre", {}, what || ""),
      answerable ? el("div", {className: "actions"}, feedback,
        r.kind === "permission" ? el("label", {className: "small"}, always, " always") : null,
        el("button", {className: "go", onclick: answer(true)}, "Approve"),
        el("button", {className: "danger", onclick: answer(false)}, "Reject"))
        : el("p", {className: "muted small"}, "waiting for the member's answer"));
  }) : el("p", {className: "muted"}, "None pending."));
}
function renderBoard(board) {
  const titles = {pending: "PENDING", in_progress: "IN PROGRESS", completed: "COMPLETED"};
  replace(view.board, Object.entries(titles).map(([key, title]) => {
    const tasks = board.columns[key] || [];
    return el("div", {className: "column", "data-column": key}, el("h3", {}, `${title} (${tasks.length})`),
      tasks.map((task) => el("div", {className: "card" + (key === "completed" ? " done" : ""), "data-task": task.id},
        el("div", {className: "subject"}, `#${task.id} `, task.subject),
        el("div", {className: "meta"}, task.owner ? `@${task.owner}`
          : key === "pending" ? (task.claimable ? "ready, unowned" : "unowned") : ""),
        task.waiting_on && task.waiting_on.length ? el("div", {className: "meta err"},
          "blocked by " + task.waiting_on.map((b) => `#${b}`).join(" ")) : null,
        task.blocks && task.blocks.length && key !== "completed" ? el("div", {className: "meta note"},
          "blocks " + task.blocks.map((b) => `#${b}`).join(" ")) : null,
        task.commits && task.commits.length ? el("div", {className: "meta"},
          "commits " + task.commits.map((c) => String(c).slice(0, 8)).join(" ")) : null)));
  }));
}
function renderChart(spend) {
  const names = Object.keys(spend);
  if (!names.length) { replace(view.chart, el("p", {className: "muted"}, "No priced model call yet.")); return; }
  const W = 640, H = 200, L = 52, B = 22;
  const points = names.flatMap((n) => spend[n]);
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]), t0 + 1);
  const top = Math.max(...points.map((p) => p[1]), 1e-6);
  const x = (t) => L + (W - L - 8) * (t - t0) / (t1 - t0), y = (v) => H - B - (H - B - 8) * v / top;
  const chart = svg("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
                            "aria-label": "spend over time per member"},
    svg("line", {x1: L, y1: H - B, x2: W - 8, y2: H - B, stroke: "#bbb"}),
    svg("line", {x1: L, y1: 8, x2: L, y2: H - B, stroke: "#bbb"}),
    svg("text", {x: 4, y: 16}, `$${top.toFixed(4)}`), svg("text", {x: 4, y: H - B}, "$0"),
    svg("text", {x: L, y: H - 4}, clock(t0)), svg("text", {x: W - 60, y: H - 4}, clock(t1)));
  names.forEach((n, i) => {
    const line = spend[n].map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
    const color = PALETTE[i % PALETTE.length];
    const path = svg("polyline", {points: [`${x(spend[n][0][0]).toFixed(1)},${y(0)}`, ...line].join(" "),
                                  fill: "none", stroke: color, "stroke-width": 2});
    path.append(svg("title", {}, `${n}: $${spend[n][spend[n].length - 1][1].toFixed(4)}`));
    chart.append(path);
  });
  replace(view.chart, chart, el("div", {className: "legend"}, names.map((n, i) =>
    el("span", {}, el("i", {style: {background: PALETTE[i % PALETTE.length]}}), n,
       ` $${spend[n][spend[n].length - 1][1].toFixed(4)}`))));
}

// -- /t/TEAM/m/NAME : one member's conversation ------------------------------------------
function buildMember() {
  const team = route.team, name = route.name;
  view.head = el("div");
  view.chat = el("div", {className: "chat"});
  view.open = new Set();
  view.chat.addEventListener("toggle", (event) => {
    const key = event.target.dataset && event.target.dataset.key;
    if (key) event.target.open ? view.open.add(key) : view.open.delete(key);
  }, true);
  const send = formOf([el("input", {name: "content", placeholder: `message to ${name}`, size: 50, required: true}),
                       el("button", {type: "submit"}, "Send")],
    (v, form) => act(team, {action: "send", to: name, content: v.content}, () => form.reset()));
  const ask = (action) => () => act(team, {action, name});
  replace(main, view.head,
    el("section", {id: "act"}, send, el("div", {className: "actions"},
      el("button", {onclick: ask("shutdown")}, "Shut down"),
      el("button", {onclick: () => confirm(`Stop ${name} now, without asking it?`) && ask("stop")()}, "Stop"),
      el("button", {onclick: ask("restart")}, "Restart"))),
    el("section", {}, el("h2", {}, "Conversation"), view.chat));
  view.built = true;
}
function itemBody(item, name, key) {
  const text = item.text || "";
  switch (item.kind) {
    case "text": return [el("strong", {}, `${name}: `), text];
    case "thinking": return ["(thinking) ", text];
    case "tool_call": return [`⚙ ${item.tool}: `, text];
    case "message_in": return [`✉ ${item.sender} → ${item.recipient}${item.type === "message" ? "" : ` [${item.type}]`}: `, text];
    case "message_out": return [`✉ ${name} → ${item.recipient}${item.type === "message" ? "" : ` [${item.type}]`}: `, text];
    case "user": return ["» ", text];
    case "compaction": return [`── compacted${item.before_tokens ? ` at ${item.before_tokens} tokens` : ""}; `
                               + `the full history is in ${item.transcript || "transcripts/"}. Summary: `, text];
    case "tool_result": {
      const lines = text.split("\n");
      const head = item.error ? "✗ " : "↳ ";
      if (lines.length <= FOLD_LINES && text.length <= FOLD_CHARS) return [head, text];
      const fold = el("details", {"data-key": key},
        el("summary", {}, `${head}${lines[0].slice(0, 120)} … (${lines.length} lines)`), el("pre", {}, text));
      fold.open = view.open.has(key);
      return [fold];
    }
    default: return [text];
  }
}
function renderMember(doc) {
  if (!view.built) buildMember();
  const m = doc.member, name = route.name;
  replace(view.head, el("h1", {}, name, " ", m ? badge(m.status, m.cells.STATUS) : el("span", {className: "muted small"}, "(not in the roster)")),
    m ? el("p", {}, `${m.role || "member"} · task ${m.cells.TASK} · up ${m.cells.UPTIME} · tokens ${m.cells.TOKENS} · cost `,
            bar((m.usage || {}).cost_usd, m.budget_usd), m.cells.COST) : null,
    m && m.last_error ? el("p", {className: "err"}, m.last_error) : null,
    doc.note ? el("p", {className: "note"}, doc.note) : null);
  const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  replace(view.chat, doc.items.length ? doc.items.map((item, i) =>
    el("div", {className: `item ${item.kind}` + (item.error ? " error" : ""), "data-kind": item.kind},
       el("span", {className: "when"}, clock(item.ts)),
       el("div", {className: "body"}, itemBody(item, name, `i${i}`))))
    : el("p", {className: "muted"}, "No conversation yet."));
  if (atBottom) window.scrollTo(0, document.body.scrollHeight);
}

// -- live -------------------------------------------------------------------------------
function listen() {
  const badgeLive = document.getElementById("live");
  const source = new EventSource("/api/live");
  source.onopen = () => { badgeLive.textContent = "live"; badgeLive.className = "live"; };
  source.onerror = () => { badgeLive.textContent = "reconnecting…"; badgeLive.className = "live off"; };
  source.onmessage = (event) => {
    let teams = [];
    try { teams = JSON.parse(event.data); } catch (_) { return; }
    if (route.page === "teams" || teams.includes(route.team) || teams.includes("")) refresh();
  };
}

crumbs();
refresh();
listen();
