// mqha web console: one ES module, no framework, no build step.
//
// The controller pushes its whole view as a "snapshot" server-sent event (GET /v1/console/events,
// documented in /openapi.json) whenever it changes; every page is a function of the latest snapshot.
// Pages are mounted once per route (hash routing: #/, #/group/<brokerName>, #/controllers,
// #/timeline, #/violations, #/access) and only their live part is redrawn on each snapshot, so a form the user
// is filling in survives updates. Admin actions call the controller's own API with the bearer token
// typed in the header (kept in sessionStorage only) after an in-page confirmation.

const TOKEN_KEY = "mqha.adminToken";
const NAV = [
  ["#/", "Overview", "overview"],
  ["#/controllers", "Controllers", "controllers"],
  ["#/timeline", "Master & SyncStateSet changes", "timeline"],
  ["#/violations", "Violations", "violations"],
  ["#/access", "Users & policies", "access"],
];

const state = { snapshot: null, connected: false, everConnected: false, mounted: null, fatal: null };

// ------------------------------------------------------------------------------------------ DOM

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "testid") el.dataset.testid = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const dash = (value) => (value === null || value === undefined ? "–" : String(value));
const num = (value) => (value === null || value === undefined ? "–" : Number(value).toLocaleString("en-US"));
const chip = (kind, text, props = {}) => h("span", { class: `chip ${kind}`, ...props }, text);

function message(kind, title, ...body) {
  return h("div", { class: `message ${kind}`, testid: `message-${kind}`, role: kind === "error" ? "alert" : null },
    h("strong", {}, title), ...body);
}

function time(ts) {
  if (!ts) return "–";
  const d = new Date(ts);
  return `${d.toLocaleTimeString("en-GB")}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

function consoleUrl(address) {
  return `http://${address}/${location.hash}`;
}

// ------------------------------------------------------------------------------------ routing

function parseRoute(hash) {
  const path = (hash || "").replace(/^#/, "") || "/";
  let parts;
  try {
    parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    return { page: "notFound", key: `notFound:${path}`, path };
  }
  if (parts.length === 0) return { page: "overview", key: "overview" };
  if (parts[0] === "group" && parts.length === 2) return { page: "group", key: `group:${parts[1]}`, name: parts[1] };
  if (parts.length === 1 && ["controllers", "timeline", "violations", "access"].includes(parts[0])) {
    return { page: parts[0], key: parts[0] };
  }
  return { page: "notFound", key: `notFound:${path}`, path };
}

// --------------------------------------------------------------------------------------- token

function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function setupToken() {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  const show = () => {
    document.getElementById("token-state").textContent = getToken() ? "token in use" : "no token";
  };
  input.value = getToken();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    else sessionStorage.removeItem(TOKEN_KEY);
    show();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    input.value = "";
    show();
  });
  show();
}

// ---------------------------------------------------------------------------- header, banners

function renderHeader(route) {
  const active = route.page === "group" ? "overview" : route.page;
  document.getElementById("nav").replaceChildren(
    ...NAV.map(([href, label, page]) => h("a", { href, class: page === active ? "active" : null }, label)));
  const badge = document.getElementById("node-badge");
  const node = state.snapshot && state.snapshot.node;
  if (node) {
    badge.textContent = `${node.nodeId} · ${node.isLeader ? "LEADER" : "FOLLOWER"} · term ${dash(node.term)}`;
    badge.className = `node-badge ${node.isLeader ? "leader" : "follower"}`;
    badge.dataset.leader = String(node.isLeader);
  }
  const conn = document.getElementById("conn");
  conn.textContent = state.connected ? "live" : "offline";
  conn.className = `conn ${state.connected ? "live" : "down"}`;
}

function renderBanners() {
  const banners = [];
  if (state.fatal) banners.push(message("error", "The console hit an error", state.fatal));
  if (!state.connected) {
    banners.push(state.everConnected
      ? message("warn", "Live updates interrupted", "Lost the event stream of this controller; reconnecting…")
      : message("info", "Connecting", "Opening the live event stream of this controller (/v1/console/events)…"));
  }
  const node = state.snapshot && state.snapshot.node;
  if (node && !node.isLeader) banners.push(followerBanner(node));
  document.getElementById("banners").replaceChildren(...banners);
}

function followerBanner(node) {
  let leader;
  if (node.leaderAddress && node.leaderId !== node.nodeId) {
    leader = h("span", {}, "The leader is ", h("b", {}, node.leaderId), ` at ${node.leaderAddress}: `,
      h("a", { href: consoleUrl(node.leaderAddress), testid: "leader-link" }, "open the leader's console"), ".");
  } else if (node.leaderId === node.nodeId) {
    leader = "This node was just elected and is not serving yet.";
  } else {
    leader = "No leader is known right now (an election is running or there is no quorum).";
  }
  return h("div", { class: "message warn", testid: "follower-banner" },
    h("strong", {}, `This controller (${node.nodeId}) is not the leader.`),
    leader, " ",
    h("span", { class: "detail" }, `Shown here: the replicated state as applied on this node (raft index ${dash(node.lastApplied)}) `
      + "and this node's own view of broker liveness. Admin actions are decided by the leader only."));
}

// -------------------------------------------------------------------------------- common views

function waiting() {
  return message("info", "Waiting for the controller", "The first update has not arrived yet.");
}

function replicaChip(replica) {
  const parts = [`#${replica.brokerId}`];
  if (replica.isMaster) parts.push("master");
  parts.push(replica.inSync ? "in sync" : "not in sync");
  parts.push(replica.alive ? "alive" : "dead");
  const kind = !replica.alive ? "bad" : replica.inSync ? "ok" : "warn";
  return chip(kind, parts.join(" · "), { title: replica.brokerAddress, "data-broker": replica.brokerId });
}

function masterCell(group) {
  if (group.masterBrokerId === null) return chip("bad", "no master");
  const master = group.replicas.find((r) => r.brokerId === group.masterBrokerId);
  return h("span", {}, chip("master", `#${group.masterBrokerId}`), " ",
    h("span", { class: "mono muted" }, dash(group.masterAddress)),
    master && !master.alive ? [" ", chip("bad", "dead")] : null);
}

function timelineTable(rows, withGroup) {
  if (!rows.length) return h("p", { class: "muted" }, "No election records applied on this node since it started.");
  return h("table", { testid: "timeline-table" },
    h("thead", {}, h("tr", {},
      h("th", {}, "Applied at"), h("th", { class: "num" }, "Raft index"), withGroup ? h("th", {}, "Group") : null,
      h("th", {}, "Record"), h("th", {}, "Result"), h("th", {}, "Master"), h("th", { class: "num" }, "Master epoch"),
      h("th", {}, "SyncStateSet"), h("th", { class: "num" }, "SSS epoch"))),
    h("tbody", {}, [...rows].reverse().map((row) => h("tr", { "data-raft-index": row.raftIndex },
      h("td", { class: "mono" }, time(row.ts)),
      h("td", { class: "num" }, row.raftIndex),
      withGroup ? h("td", {}, h("a", { href: `#/group/${encodeURIComponent(row.brokerName)}` }, row.brokerName)) : null,
      h("td", {}, row.type, row.unclean ? [" ", chip("bad", "unclean")] : null,
        row.ackedDataLost ? [" ", chip("bad", `acked data lost [${row.ackedDataLost.fromOffset}, ${row.ackedDataLost.toOffset})`)] : null),
      h("td", {}, row.accepted ? chip("ok", "applied") : chip("warn", row.codeName, { title: row.remark })),
      h("td", {}, row.masterBrokerId === null ? chip("bad", "none") : `#${row.masterBrokerId}`),
      h("td", { class: "num" }, dash(row.masterEpoch)),
      h("td", {}, row.syncStateSet ? `{${row.syncStateSet.join(", ")}}` : "–"),
      h("td", { class: "num" }, dash(row.syncStateSetEpoch))))));
}

// ---------------------------------------------------------------------------------------- pages

function overviewPage() {
  const live = h("div");
  const update = (snap) => {
    if (!snap) return live.replaceChildren(waiting());
    if (!snap.groups.length) {
      return live.replaceChildren(message("info", "No broker groups yet", "No broker has registered with the controllers."));
    }
    live.replaceChildren(...Object.entries(snap.clusters).map(([cluster, names]) => h("div", { class: "card" },
      h("h2", {}, `Cluster ${cluster}`),
      h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Group"), h("th", {}, "Master"), h("th", { class: "num" }, "Master epoch"),
          h("th", {}, "SyncStateSet"), h("th", { class: "num" }, "SSS epoch"), h("th", {}, "Replicas"))),
        h("tbody", {}, names.map((name) => snap.groups.find((g) => g.brokerName === name)).map((g) =>
          h("tr", { testid: `group-row-${g.brokerName}` },
            h("td", {}, h("a", { href: `#/group/${encodeURIComponent(g.brokerName)}` }, h("b", {}, g.brokerName))),
            h("td", { testid: `master-${g.brokerName}`, "data-value": dash(g.masterBrokerId) }, masterCell(g)),
            h("td", { class: "num", testid: `master-epoch-${g.brokerName}`, "data-value": g.masterEpoch }, g.masterEpoch),
            h("td", { testid: `sss-${g.brokerName}`, "data-value": g.syncStateSet.join(",") },
              h("span", { class: "chips" }, g.syncStateSet.map((id) => chip("neutral", `#${id}`)))),
            h("td", { class: "num" }, g.syncStateSetEpoch),
            h("td", {}, h("span", { class: "chips" }, g.replicas.map(replicaChip))))))))));
  };
  return { el: h("div", {}, h("h1", {}, "Broker groups"), live), update };
}

function groupPage(route) {
  const name = route.name;
  const live = h("div");
  const actions = adminPanel(name);
  const history = h("div", { class: "card", hidden: true });
  const update = (snap) => {
    if (!snap) return live.replaceChildren(waiting());
    const group = snap.groups.find((g) => g.brokerName === name);
    actions.el.hidden = history.hidden = !group;
    if (!group) {
      const known = snap.groups.map((g) => g.brokerName);
      return live.replaceChildren(message("error", `Unknown broker group "${name}"`,
        known.length ? `This controller knows: ${known.join(", ")}. ` : "This controller knows no broker group yet. ",
        h("a", { href: "#/" }, "Back to the overview"), "."));
    }
    actions.sync(group);
    const master = group.replicas.find((r) => r.isMaster);
    live.replaceChildren(
      h("h1", {}, `Group ${group.brokerName} `, h("span", { class: "muted small" }, `cluster ${group.clusterName}`)),
      h("div", { class: "stats" },
        stat("Master", group.masterBrokerId === null ? "none" : `#${group.masterBrokerId}`,
          master ? `${master.brokerAddress} · ${master.alive ? "alive" : "dead"}` : "no master elected", `master-${name}`,
          dash(group.masterBrokerId)),
        stat("Master epoch", group.masterEpoch, "bumped by every election", `master-epoch-${name}`, group.masterEpoch),
        stat("SyncStateSet", `{${group.syncStateSet.join(", ")}}`, `epoch ${group.syncStateSetEpoch}`, `sss-${name}`,
          group.syncStateSet.join(",")),
        stat("Replicas alive", `${group.replicas.filter((r) => r.alive).length} / ${group.replicas.length}`,
          "heartbeats seen by this node"),
        stat("Eligible (ELR)", `{${(group.eligibleReplicas || []).join(", ")}}`,
          `replicated watermark ${num(group.ackedWatermark)}`, `elr-${name}`, (group.eligibleReplicas || []).join(","))),
      // replaceChildren writes a null as the text "null": "" when nothing waits.
      group.electionWaiting ? message("warn", "The election waits for a replica holding every acknowledged message",
        `Waiting for broker(s) ${group.electionWaiting.waitingFor.join(", ")} (acknowledged up to offset `
        + `${group.electionWaiting.watermark}) since ${time(group.electionWaiting.sinceMs)}. Start them, or force an `
        + "election with electMaster (it declares the missing range lost).") : "",
      h("div", { class: "card" }, h("h2", {}, "Replicas"), replicaTable(group)));
    history.replaceChildren(h("h2", {}, "Recent master and SyncStateSet changes of this group"),
      timelineTable(snap.timeline.filter((row) => row.brokerName === name).slice(-10), false));
  };
  return { el: h("div", {}, live, actions.el, history), update };
}

function stat(label, value, sub, testid, dataValue) {
  return h("div", { class: "stat", testid, "data-value": dataValue },
    h("div", { class: "label" }, label), h("div", { class: "value" }, value), h("div", { class: "sub" }, sub));
}

function replicaTable(group) {
  return h("table", { testid: "replica-table" },
    h("caption", { class: "muted small" }, "Offsets are each replica's last heartbeat as this node heard it "
      + "(see Reported); lag = the master's max offset − the replica's; \"ahead\": past the master, not in its "
      + "SyncStateSet or epoch (a tail it truncates when it connects)."),
    h("thead", {}, h("tr", {}, h("th", {}, "Broker"), h("th", {}, "Address"), h("th", {}, "Role"), h("th", {}, "In sync"),
      h("th", {}, "Alive"), h("th", { class: "num" }, "Epoch"), h("th", { class: "num" }, "Max offset"),
      h("th", { class: "num" }, "Confirm offset"), h("th", { class: "num" }, "Lag (bytes)"),
      h("th", { class: "num" }, "Reported"))),
    h("tbody", {}, group.replicas.map((r) => h("tr", { testid: `replica-${r.brokerId}` },
      h("td", {}, h("b", {}, `#${r.brokerId}`)),
      h("td", { class: "mono" }, r.brokerAddress),
      h("td", {}, r.isMaster ? chip("master", "MASTER") : chip("neutral", "SLAVE")),
      h("td", {}, r.inSync ? chip("ok", "in sync") : chip("warn", "not in sync")),
      h("td", {}, r.alive ? chip("ok", "alive") : chip("bad", "dead"),
        r.lossyRecovery ? [" ", chip("bad", "lossy start", { title: `confirm offset before recovery ${r.confirmOffsetBeforeRecovery}` })] : null,
        r.eligibleCredit !== null && r.eligibleCredit !== undefined ? [" ", chip("neutral", `ELR ${r.eligibleCredit}`)] : null),
      h("td", { class: "num" }, dash(r.epoch)),
      h("td", { class: "num" }, num(r.maxOffset)),
      h("td", { class: "num" }, num(r.confirmOffset)),
      h("td", { class: "num", testid: `lag-${r.brokerId}`, "data-value": r.lag === null ? "" : r.lag }, lagCell(r)),
      h("td", { class: "num muted" }, r.reportedMsAgo === null ? "–" : `${(r.reportedMsAgo / 1000).toFixed(1)} s ago`)))));
}

function lagCell(r) {
  if (r.isMaster || r.lag === null) return "–";
  if (r.newerReportBytes) {
    // An in-sync replica of the master's epoch holds a prefix of the master's log: it only reported later.
    return h("span", { title: "this replica's heartbeat is newer than the master's: its max offset passes "
      + "the master's older report, but it holds nothing the master lacks" },
      "0 ", h("span", { class: "muted small" }, `(newer report, +${num(r.newerReportBytes)})`));
  }
  if (r.lag >= 0) return num(r.lag);
  // A replica past its master: an unconfirmed tail it truncates on connecting, or heartbeats of different moments.
  return chip("warn", `ahead ${num(-r.lag)}`, { title: "this replica's log ends past the master's: an unconfirmed "
    + "tail it truncates when it connects to the master, or the two heartbeats were taken at different moments" });
}

function controllersPage() {
  const live = h("div");
  const update = (snap) => {
    if (!snap) return live.replaceChildren(waiting());
    const node = snap.node;
    live.replaceChildren(
      h("div", { class: "stats" },
        stat("This node", node.nodeId, node.address),
        stat("Role", node.isLeader ? "LEADER" : "FOLLOWER", node.isLeader ? "serving" : `leader: ${dash(node.leaderId)}`),
        stat("Raft term", dash(node.term), `commit index ${dash(node.commitIndex)}`),
        stat("Health", node.healthy ? "healthy" : "unhealthy", `applied index ${dash(node.lastApplied)}`)),
      h("div", { class: "card" }, h("h2", {}, "Controller nodes"),
        h("table", { testid: "controllers-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Node"), h("th", {}, "API address"), h("th", {}, "Role"),
            h("th", {}, `Reachable from ${node.nodeId}`), h("th", {}, "Console"))),
          h("tbody", {}, snap.controllers.map((c) => h("tr", { testid: `controller-${c.nodeId}` },
            h("td", {}, h("b", {}, c.nodeId), c.isSelf ? h("span", { class: "muted small" }, " (this node)") : null),
            h("td", { class: "mono" }, c.address),
            h("td", {}, c.isLeader ? chip("master", "LEADER") : chip("neutral", "follower")),
            h("td", {}, c.reachable === true ? chip("ok", c.isSelf ? "healthy" : "connected")
              : c.reachable === false ? chip("bad", c.isSelf ? "unhealthy" : "not connected") : chip("neutral", "unknown")),
            h("td", {}, c.isSelf ? h("span", { class: "muted" }, "here") : h("a", { href: consoleUrl(c.address) }, "open"))))))),
      h("p", { class: "muted small" }, "Reachability is the Raft connection as this node sees it; the term and "
        + "indexes are this node's."));
  };
  return { el: h("div", {}, h("h1", {}, "Controllers"), live), update };
}

function timelinePage() {
  const live = h("div");
  const update = (snap) => {
    if (!snap) return live.replaceChildren(waiting());
    live.replaceChildren(h("div", { class: "card" }, timelineTable(snap.timeline, true)),
      h("p", { class: "muted small" }, "Elections (the master), SyncStateSet shrinks and expansions and cleans as applied on this node "
        + `(the last ${snap.timeline.length}, newest first). Rejected records are fenced decisions that changed nothing.`));
  };
  return { el: h("div", {}, h("h1", {}, "Master and SyncStateSet changes"), live), update };
}

function violationsPage() {
  const body = h("div", {}, message("info", "Loading", "Reading the analysis report…"));
  const load = async () => {
    let status = 0;
    let doc = null;
    try {
      const response = await fetch("/v1/console/analysis", { cache: "no-store" });
      status = response.status;
      doc = await response.json();
    } catch (err) {
      return body.replaceChildren(message("error", "Cannot load the analysis", `The controller did not answer: ${err.message}`));
    }
    if (status !== 200 || doc.code !== 0) {
      return body.replaceChildren(message("error", "Cannot load the analysis", `HTTP ${status} · ${dash(doc.codeName)}: ${dash(doc.remark)}`));
    }
    body.replaceChildren(...analysisView(doc));
  };
  load();
  return {
    el: h("div", {}, h("h1", {}, "Violations ", h("button", { class: "btn secondary", onclick: load }, "Reload")), body),
    update: () => {},
  };
}

function analysisView(doc) {
  if (!doc.configured) {
    return [message("info", "No analysis report configured",
      "Set the controller key consoleAnalysisReportDir to the directory of an ",
      h("code", {}, "mqha analyze --report-dir DIR"), " run to see its verdict here.")];
  }
  if (doc.error) return [message("error", "The analysis report cannot be shown", doc.error)];
  const report = doc.report;
  const reasons = (report.reasons || []).filter((r) => !r.startsWith("violated:"));
  const why = reasons.length ? h("ul", {}, reasons.map((r) => h("li", {}, r))) : "";
  const verdict = report.status === "ok"
    ? message("ok", "Verdict: OK", "Every invariant holds, and the export held everything the proof needs.")
    : report.status === "inconclusive"
      ? message("warn", "Verdict: INCONCLUSIVE", "Nothing was violated, but the export is not enough to say OK:", why)
      : message("error", `Verdict: FAILED (${report.failed.length} invariant${report.failed.length === 1 ? "" : "s"} violated)`,
        report.failed.join(", "), why);
  verdict.dataset.testid = "verdict";
  verdict.dataset.value = report.status;
  const parts = [verdict,
    h("p", { class: "muted small" }, `Report ${doc.reportDir} · source ${report.source || "–"} · engine ${report.engine || "–"} · `
      + Object.entries(report.tables).map(([t, n]) => `${t} ${n}`).join(", ")),
    h("div", { class: "card" }, h("h2", {}, "Checks"),
      h("table", { testid: "checks-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Check"), h("th", {}, "Result"), h("th", { class: "num" }, "Count"), h("th", {}, "Meaning"))),
        h("tbody", {}, report.checks.map((c) => h("tr", {},
          h("td", {}, h("b", {}, c.name)),
          h("td", {}, !c.failure ? chip("neutral", "counted") : c.count ? chip("bad", "FAIL") : chip("ok", "ok")),
          h("td", { class: "num" }, c.count),
          h("td", { class: "muted" }, c.description))))))];
  if (report.coverage && report.coverage.sets) {
    const cov = report.coverage;
    parts.push(h("div", { class: "card" },
      h("h2", {}, "What was checked"),
      h("p", { class: "muted small" }, `${cov.acksChecked} acknowledged puts (${cov.acksByBroker} recorded by brokers, `
        + `${cov.acksByClient} by clients) compared with the final master logs; ${cov.finalLogReplicas} replica final logs.`),
      h("table", { testid: "coverage-table" },
        h("thead", {}, h("tr", {}, ["Set", "Final master", "Replicas", "Final log rows", "Acks checked", "Expired",
          "Not checked", "Reads"].map((t) => h("th", {}, t)))),
        h("tbody", {}, Object.entries(cov.sets).map(([name, s]) => h("tr", {},
          h("td", {}, h("b", {}, name)),
          h("td", {}, dash(s.finalMasterId)),
          h("td", { class: "mono" }, s.replicas.join(", ")),
          h("td", { class: "mono" }, s.finalLogs.map((l) => `${l.brokerId}: ${l.rows}`).join(" · ") || "none"),
          h("td", { class: "num" }, s.acksChecked),
          h("td", { class: "num" }, s.acksExpired),
          h("td", { class: "num" }, s.acksUnchecked ? chip("warn", String(s.acksUnchecked)) : 0),
          h("td", { class: "num" }, s.reads)))))));
  }
  for (const c of report.checks.filter((check) => check.rows.length)) {
    const cols = Object.keys(c.rows[0]);
    parts.push(h("div", { class: "card" },
      h("h2", {}, `${c.name}: evidence`, c.count > c.rows.length ? ` (first ${c.rows.length} of ${c.count})` : ""),
      h("table", {}, h("thead", {}, h("tr", {}, cols.map((col) => h("th", {}, col)))),
        h("tbody", {}, c.rows.map((row) => h("tr", {}, cols.map((col) => h("td", { class: "mono" }, JSON.stringify(row[col])))))))));
  }
  return parts;
}

function notFoundPage(route) {
  return {
    el: message("error", "Unknown page", `There is no console page at "#${route.path}". `,
      h("a", { href: "#/" }, "Go to the overview"), "."),
    update: () => {},
  };
}

// ACL 2.0 users and policies (docs/architecture.md §12.11): not in the public snapshot; fetched with the
// admin token from the leader's admin routes, which never answer a password.
function accessPage() {
  const live = h("div", {}, message("info", "Loading users and policies", ""));
  async function get(path) {
    const headers = {};
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { headers });
    const doc = await response.json().catch(() => null);
    if (!doc || doc.code !== 0) {
      const hint = response.status === 401 || response.status === 403
        ? " They need the admin token: enter adminAuthToken in the header, press Use, then Refresh."
        : "";
      throw new Error(`${path}: HTTP ${response.status}${doc ? ` · ${doc.codeName} ${doc.remark}` : ""}.${hint}`);
    }
    return doc;
  }
  async function load() {
    try {
      const [users, acls] = await Promise.all([get("/v1/acl/users"), get("/v1/acl/policies")]);
      const entries = acls.acls.flatMap((acl) => acl.entries.map((entry) => [acl.subject, entry]));
      live.replaceChildren(
        h("div", { class: "card" }, h("h2", {}, `Users (${users.users.length})`),
          h("table", { testid: "acl-users" },
            h("thead", {}, h("tr", {}, h("th", {}, "User"), h("th", {}, "Type"))),
            h("tbody", {}, users.users.map((u) => h("tr", {}, h("td", { class: "mono" }, u.username),
              h("td", {}, u.userType === "Super" ? chip("master", "Super") : chip("neutral", u.userType))))))),
        h("div", { class: "card" }, h("h2", {}, `Policy entries (${entries.length})`),
          h("table", { testid: "acl-policies" },
            h("thead", {}, h("tr", {}, ["Subject", "Resource", "Actions", "Source IPs", "Decision"].map((t) => h("th", {}, t)))),
            h("tbody", {}, entries.map(([subject, e]) => h("tr", {},
              h("td", { class: "mono" }, subject), h("td", { class: "mono" }, e.resource), h("td", {}, e.actions.join(", ")),
              h("td", { class: "mono" }, (e.sourceIps || []).join(", ") || "any"),
              h("td", {}, e.decision === "Deny" ? chip("bad", "Deny") : chip("ok", "Allow"))))))));
    } catch (err) {
      live.replaceChildren(message("error", "Users and policies not shown", ` ${err.message}`));
    }
  }
  load();
  const refresh = h("button", { type: "button", testid: "acl-refresh", onclick: load }, "Refresh");
  return {
    el: h("div", {}, h("h1", {}, "Users & policies"),
      h("p", { class: "muted small" }, "Managed with mqadmin createUser / createAcl; passwords are never shown. ", refresh),
      live),
    update() {},
  };
}

const PAGES = {
  access: accessPage,
  overview: overviewPage,
  group: groupPage,
  controllers: controllersPage,
  timeline: timelinePage,
  violations: violationsPage,
  notFound: notFoundPage,
};

// ---------------------------------------------------------------------------------- admin panel

function adminPanel(name) {
  const electSelect = h("select", { testid: "elect-broker" });
  const cleanIds = h("span", { class: "chips" });
  const cleanLiving = h("input", { type: "checkbox", testid: "clean-living" });
  const result = h("div", { class: "result", testid: "action-result" });
  let group = null;
  let shownIds = "";

  const elect = async () => {
    const brokerId = Number(electSelect.value);
    const ok = await confirmDialog("Designated election",
      [`Make broker #${brokerId} the master of ${name}?`,
        `The current master is ${group.masterBrokerId === null ? "none" : `#${group.masterBrokerId}`} (masterEpoch ${group.masterEpoch}). `
        + "The controller only elects it if it is alive and in the SyncStateSet; the master epoch is bumped and the "
        + "old master steps down."], "Elect");
    if (!ok) return;
    await runAction(result, "Designated elect", `/v1/groups/${encodeURIComponent(name)}/elect`,
      { clusterName: group.clusterName, brokerId, designateElect: true });
  };

  const clean = async () => {
    const ids = [...cleanIds.querySelectorAll("input:checked")].map((box) => Number(box.value));
    const living = cleanLiving.checked;
    const what = living ? `the whole group ${name}, even while its brokers are alive`
      : ids.length ? `broker${ids.length > 1 ? "s" : ""} ${ids.map((id) => `#${id}`).join(", ")} of ${name}`
        : `the whole group ${name} (refused while it has a master)`;
    const ok = await confirmDialog("Clean broker metadata",
      [`Remove the controller's metadata of ${what}?`,
        "Cleaned brokers must register again to get an id; this cannot be undone."], "Clean", true);
    if (!ok) return;
    await runAction(result, "Clean broker metadata", `/v1/groups/${encodeURIComponent(name)}/clean`,
      { clusterName: group.clusterName, brokerControllerIdsToClean: ids.length ? ids : null, cleanLivingBroker: living });
  };

  const el = h("div", { class: "card", testid: "admin-panel" },
    h("h2", {}, "Admin actions"),
    h("p", { class: "muted small" }, "Sent to this controller with the admin token from the header "
      + "(Authorization: Bearer …). Each asks for confirmation first."),
    h("div", { class: "actions" },
      h("div", { class: "action" }, h("h3", {}, "Designated elect"),
        h("p", {}, "Choose the broker that should become master."),
        h("div", { class: "row" }, h("label", {}, "Broker ", electSelect),
          h("button", { class: "btn", testid: "elect-button", onclick: () => elect() }, "Elect…"))),
      h("div", { class: "action" }, h("h3", {}, "Clean broker metadata"),
        h("p", {}, "Forget dead replicas (or, with nothing ticked, a group without a master)."),
        h("div", { class: "row" }, cleanIds),
        h("div", { class: "row" }, h("label", { class: "check" }, cleanLiving, "also if alive (whole group)"),
          h("button", { class: "btn danger", testid: "clean-button", onclick: () => clean() }, "Clean…")))),
    result);

  const sync = (current) => {
    group = current;
    const ids = current.replicas.map((r) => r.brokerId).join(",");
    if (ids === shownIds) return;
    shownIds = ids;
    const selected = electSelect.value;
    electSelect.replaceChildren(...current.replicas.map((r) => h("option", { value: r.brokerId }, `#${r.brokerId}`)));
    if (current.replicas.some((r) => String(r.brokerId) === selected)) electSelect.value = selected;
    cleanIds.replaceChildren(...current.replicas.map((r) => h("label", { class: "check" },
      h("input", { type: "checkbox", value: r.brokerId, testid: `clean-id-${r.brokerId}` }), `#${r.brokerId}`)));
  };
  return { el, sync };
}

async function runAction(result, label, path, body) {
  result.replaceChildren(message("info", `${label}: sending…`, ""));
  const headers = { "Content-Type": "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let status = 0;
  let doc = null;
  try {
    const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
    status = response.status;
    doc = await response.json().catch(() => null);
  } catch (err) {
    return result.replaceChildren(message("error", `${label}: no answer`, `The controller did not answer: ${err.message}`));
  }
  result.dataset.status = String(status);
  result.dataset.code = doc ? String(doc.code) : "";
  const line = `HTTP ${status} · code ${doc ? doc.code : "?"} ${doc ? doc.codeName : "(not a JSON answer)"}`;
  const remark = doc && doc.remark ? doc.remark : "";
  if (doc && doc.code === 0) {
    const detail = doc.masterBrokerId !== undefined
      ? ` New master #${dash(doc.masterBrokerId)}, masterEpoch ${dash(doc.masterEpoch)}, SyncStateSet {${(doc.syncStateSet || []).join(", ")}}.`
      : "";
    return result.replaceChildren(message("ok", `${label}: done`, h("span", { class: "code" }, line), ` ${remark}${detail}`));
  }
  const hint = [];
  if (status === 401) hint.push(" This controller requires the admin token: enter adminAuthToken in the header and press Use.");
  if (status === 403) hint.push(" The admin token in use is wrong: correct it in the header.");
  if (status === 421) {
    hint.push(" Only the leader decides.");
    if (doc && doc.leaderAddress) hint.push(" ", h("a", { href: consoleUrl(doc.leaderAddress) }, "Open the leader's console"), ".");
  }
  result.replaceChildren(message("error", `${label}: refused`, h("span", { class: "code" }, line), remark ? ` — ${remark}.` : "", hint));
}

function confirmDialog(title, paragraphs, confirmLabel, danger = false) {
  const root = document.getElementById("dialog-root");
  return new Promise((resolve) => {
    const close = (answer) => {
      root.replaceChildren();
      document.removeEventListener("keydown", onKey);
      resolve(answer);
    };
    const onKey = (event) => { if (event.key === "Escape") close(false); };
    document.addEventListener("keydown", onKey);
    root.replaceChildren(h("div", { class: "dialog-backdrop" },
      h("div", { class: "dialog", role: "dialog", "aria-modal": "true", testid: "dialog" },
        h("h3", {}, title), paragraphs.map((text) => h("p", {}, text)),
        h("div", { class: "buttons" },
          h("button", { class: "btn secondary", testid: "dialog-cancel", onclick: () => close(false) }, "Cancel"),
          h("button", { class: `btn${danger ? " danger" : ""}`, testid: "dialog-confirm", onclick: () => close(true) }, confirmLabel)))));
  });
}

// ------------------------------------------------------------------------------------ main loop

function render() {
  const route = parseRoute(location.hash);
  try {
    renderHeader(route);
    renderBanners();
    if (!state.mounted || state.mounted.key !== route.key) {
      const page = PAGES[route.page](route);
      state.mounted = { key: route.key, page };
      document.getElementById("main").replaceChildren(page.el);
    }
    state.mounted.page.update(state.snapshot);
  } catch (err) {
    showFatal(err);
  }
}

function showFatal(err) {
  state.fatal = `${err && err.message ? err.message : err}. Reload the page; if it persists, report it with this text.`;
  document.getElementById("banners").replaceChildren(message("error", "The console hit an error", state.fatal));
}

function connect() {
  const events = new EventSource("/v1/console/events");
  events.addEventListener("open", () => {
    state.connected = true;
    state.everConnected = true;
    render();
  });
  events.addEventListener("snapshot", (event) => {
    try {
      state.snapshot = JSON.parse(event.data);
    } catch (err) {
      return showFatal(new Error(`unreadable update from the controller (${err.message})`));
    }
    state.connected = true;
    render();
  });
  events.addEventListener("error", () => {
    state.connected = false;  // EventSource reconnects by itself (the server asks for 1 s)
    render();
  });
}

window.addEventListener("error", (event) => showFatal(event.error || event.message));
window.addEventListener("unhandledrejection", (event) => showFatal(event.reason));
window.addEventListener("hashchange", render);
setupToken();
render();
connect();
