// zeus ui: the page. It reads only the four endpoints (/, /api/tree,
// /api/delegations/{id}, /api/events) and writes nothing anywhere.
"use strict";
(() => {
  const token = new URLSearchParams(location.search).get("token");
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const $ = (id) => document.getElementById(id);
  const MARKS = { completed: "✔", partial: "◐", timed_out: "◔", failed: "✘", cancelled: "⊘",
    budget_exceeded: "¤", blocked: "■", "in progress": "…", unsettled: "?" };
  const OUTCOMES = ["completed", "transient", "error", "timeout", "stale", "crash",
    "budget_exceeded", "cancelled", "lost", "unavailable", "open"];
  // What the page has read; `window.zeusUi` lets a test or a host see it.
  const state = { tree: null, skew: 0, detail: null, events: 0, renders: 0, lags: [],
    lastRenderMs: 0, firstRenderAt: null, firstRenderMs: null, connected: false };
  window.zeusUi = state;

  const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const cls = (s) => String(s ?? "").replace(/[^a-z0-9_]+/gi, "-");
  const secs = (v) => (v == null ? "-" : Number(v).toFixed(2) + "s");
  const clock = (ts) => (ts == null ? "-" : new Date(ts * 1000).toISOString().slice(11, 23));
  const now = () => {
    const run = state.tree && state.tree.run;
    if (run && run.owner_gone) return run.ended_ts ?? run.last_ts; // nothing moves any more
    return Date.now() / 1000 + state.skew;
  };

  async function getJson(path) {
    const response = await fetch(path, { headers, cache: "no-store" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  // -- the tree -------------------------------------------------------------------------
  function ordered(delegations) {
    // Depth-first in dispatch order, so a child sits under its parent.
    const byParent = new Map();
    const ids = new Set(delegations.map((d) => d.id));
    for (const d of delegations) {
      const p = d.parent_id && ids.has(d.parent_id) ? d.parent_id : "";
      if (!byParent.has(p)) byParent.set(p, []);
      byParent.get(p).push(d);
    }
    const out = [];
    const walk = (p, depth) => {
      for (const d of byParent.get(p) || []) {
        out.push([d, depth]);
        walk(d.id, depth + 1);
      }
    };
    walk("", 0);
    return out;
  }

  function matches(d, q) {
    if (!q) return true;
    return (d.id + " " + d.agents.join(" ") + " " + d.status + " " + d.scope + " " + (d.host || "")).toLowerCase().includes(q);
  }

  // -- a shared store's hosts ---------------------------------------------------------------
  const short = (id) => String(id ?? "").slice(0, 8);
  const hostsOf = () => (state.tree && state.tree.hosts) || null; // null: the source has none

  function lease(h) {
    // Its seconds left as the server read them, run down by the clock since.
    if (h.released != null) return ["released", "ended"];
    if (h.taken_by != null) return ["taken over by " + short(h.taken_by), "ended"];
    if (h.lease_left_s == null) return ["-", ""];
    const left = h.lease_left_s - (Date.now() / 1000 + state.skew - state.tree.now);
    return left > 0 ? [left.toFixed(1) + "s left", "held"] : ["expired " + (-left).toFixed(1) + "s ago", "expired"];
  }

  function hostBadge(d) {
    // Which host owns the delegation: shown only when the store has more than one.
    const hs = hostsOf();
    if (!d.host || !hs || hs.length < 2) return "";
    const n = hs.findIndex((h) => h.id === d.host);
    const h = hs[n];
    const where = h ? ` (pid ${h.pid} on ${h.host})` : "";
    return `<span class="badge host" data-host="${esc(d.host)}" style="--hue:${(Math.max(n, 0) * 137) % 360}" ` +
      `title="${esc("owned by host " + d.host + where)}">${esc(short(d.host))}</span>`;
  }

  function renderHosts() {
    const hs = hostsOf();
    $("hosts").hidden = !hs;
    $("hosts-tab").hidden = !hs;
    if (!hs) return;
    const leases = hs.map(lease);
    const held = leases.filter(([, how]) => how === "held").length;
    $("hosts-count").textContent = `${hs.length} · ${held} holding a lease`;
    if (!hs.length) { $("hosts-body").innerHTML = `<p class="muted">None.</p>`; return; }
    const head = ["Host", "Machine", "PID", "Since", "Lease", "Owns (open)"];
    $("hosts-body").innerHTML = `<table><thead><tr>${head.map((h) => `<th scope="col">${h}</th>`).join("")}</tr></thead><tbody>` +
      hs.map((h, n) => {
        const [words, how] = leases[n];
        return `<tr data-host="${esc(h.id)}" data-lease="${how}"><td><span class="badge host" style="--hue:${(n * 137) % 360}" ` +
          `title="${esc(h.id)}">${esc(short(h.id))}</span></td><td>${esc(h.host)}</td><td class="num">${esc(h.pid)}</td>` +
          `<td>${clock(h.since)}</td><td class="lease ${how}">${esc(words)}</td><td class="num">${esc(h.owns)}</td></tr>`;
      }).join("") + `</tbody></table>`;
  }

  function meter(ratio, label) {
    const r = Math.max(0, Math.min(1, ratio));
    const level = r >= 0.9 ? "bad" : r >= 0.6 ? "warn" : "";
    return `<div class="meter ${level}" role="meter" aria-valuemin="0" aria-valuemax="100" ` +
      `aria-valuenow="${Math.round(r * 100)}" title="${esc(label)}"><i style="width:${(r * 100).toFixed(1)}%"></i></div>` +
      `<div class="small">${esc(label)}</div>`;
  }

  function deadlineCell(d) {
    const open = d.attempts.filter((a) => !a.outcome && a.started_ts != null && !a.fenced);
    const a = open[open.length - 1];
    if (a && a.deadline_s) {
      const used = now() - a.started_ts;
      return meter(used / a.deadline_s, `${a.id}: ${secs(used)} of ${secs(a.deadline_s)}`);
    }
    return `<div class="small">${d.status === "in progress" ? "running " : ""}${secs(d.elapsed_s)}</div>`;
  }

  function spendCell(d) {
    const u = d.usage || {};
    const b = d.budget || {};
    const parts = [];
    let worst = -1;
    const pairs = [["calls", "max_calls", "calls"], ["cost", "max_cost", "cost"],
      ["input_tokens", "max_input_tokens", "in tok"], ["output_tokens", "max_output_tokens", "out tok"]];
    for (const [k, cap, word] of pairs) {
      if (u[k] == null && b[cap] == null) continue;
      const val = u[k] ?? 0;
      const shown = k === "cost" ? Number(val).toFixed(3) : val;
      parts.push(b[cap] != null ? `${word} ${shown}/${b[cap]}` : `${word} ${shown}`);
      if (b[cap]) worst = Math.max(worst, val / b[cap]);
    }
    if (!parts.length) return `<div class="small">-</div>`;
    return worst >= 0 ? meter(worst, parts.join(", ")) : `<div class="small">${esc(parts.join(", "))}</div>`;
  }

  // "in Bash 12.0s": the tool call a running attempt is in, and for how long.
  function inFlight(a) {
    const t = a.in_tool;
    if (!t || a.outcome || a.fenced) return null;
    return "in " + t.tool + (t.started_ts != null ? " " + Math.max(0, now() - t.started_ts).toFixed(1) + "s" : "");
  }

  function progressCell(d) {
    const a = d.attempts[d.attempts.length - 1];
    if (!a) return `<div class="small">waiting</div>`;
    const bits = [];
    if (a.progress != null) bits.push("progress " + (typeof a.progress === "object" ? JSON.stringify(a.progress) : a.progress));
    if (a.partials) bits.push(a.partials + " partial");
    if (a.note) bits.push(a.note);
    const inTool = inFlight(a);
    if (inTool) bits.unshift(inTool);
    else if (a.last_tool) bits.push("last tool " + a.last_tool);
    if (a.bad_lines) bits.push(a.bad_lines + " bad lines");
    const tool = inTool ? ` data-in-tool="${esc(a.in_tool.tool)}"` : "";
    return `<div class="small"${tool} title="${esc(bits.join("; "))}">${esc(bits.join(" · ") || "-")}</div>`;
  }

  function row(d, depth) {
    const mark = MARKS[d.status] || "•";
    const badges = [];
    if (d.retries) badges.push(`<span class="badge retry">${d.retries} retr${d.retries > 1 ? "ies" : "y"}</span>`);
    if (d.fallbacks) badges.push(`<span class="badge fallback">fallback</span>`);
    const kills = d.attempts.filter((a) => a.killed).length;
    if (kills) badges.push(`<span class="badge kill">killed ×${kills}</span>`);
    if (d.cancel_requested) badges.push(`<span class="badge">cancel asked</span>`);
    if (d.resolved) badges.push(`<span class="badge by-hand" title="${esc(d.resolved.note || "")}">settled by hand</span>`);
    badges.push(hostBadge(d));
    return `<div class="row" role="listitem" data-id="${esc(d.id)}" data-status="${esc(d.status)}">` +
      `<div class="name c-name" style="padding-left:${depth * 1.1}rem">` +
      `<span class="mark s-${cls(d.status)}" aria-hidden="true">${mark}</span>` +
      `<a class="id" href="#d/${encodeURIComponent(d.id)}">${esc(d.id)}</a> ` +
      `<span class="muted">${esc(d.agents.join(" → "))}</span>${badges.join("")}` +
      `<span class="scope">${esc(d.scope)}</span></div>` +
      `<div class="c-status s-${cls(d.status)}">${esc(d.status.replace(/_/g, " "))}</div>` +
      `<div class="small c-attempts">${d.attempts.length} attempt${d.attempts.length === 1 ? "" : "s"}</div>` +
      `<div class="c-deadline">${deadlineCell(d)}</div>` +
      `<div class="c-progress">${progressCell(d)}</div>` +
      `<div class="c-spend">${spendCell(d)}</div></div>`;
  }

  function renderTree(t, list) {
    const head = `<div class="row head" aria-hidden="true"><div>delegation</div><div>status</div>` +
      `<div>attempts</div><div>deadline / elapsed</div><div>progress</div><div>spend / budget</div></div>`;
    $("tree-rows").innerHTML = list.length
      ? head + list.map(([d, depth]) => row(d, depth)).join("")
      : `<p class="muted">No delegations yet.</p>`;
    $("tree-count").textContent = `${list.length} of ${t.delegations.length}`;
    const seen = new Set(t.delegations.map((d) => d.status));
    $("legend").innerHTML = Object.entries(MARKS).filter(([s]) => seen.has(s))
      .map(([s, m]) => `<span><span class="mark s-${cls(s)}">${m}</span>${esc(s.replace(/_/g, " "))}</span>`).join("");
  }

  // -- the timeline -----------------------------------------------------------------------
  function renderTimeline(t, list) {
    const attempts = list.flatMap(([d]) => d.attempts);
    const starts = attempts.map((a) => a.started_ts).filter((v) => v != null);
    $("timeline-count").textContent = `${attempts.length} attempt${attempts.length === 1 ? "" : "s"}`;
    $("timeline-keys").innerHTML = OUTCOMES.map((o) => `<span><span class="swatch o-${o}"></span>${o.replace(/_/g, " ")}</span>`).join("") +
      `<span><span class="key-tick"></span>deadline or stale</span><span><span class="key-tick kill"></span>killed</span>` +
      `<span><span class="key-tool"></span>tool call</span><span><span class="key-tool writes"></span>with side effects</span>` +
      `<span><span class="key-tool in-flight"></span>in flight</span>`;
    if (!starts.length) { $("timeline-body").innerHTML = `<p class="muted">No attempts yet.</p>`; return; }
    const t0 = Math.min(...starts);
    const end = now();
    const t1 = Math.max(t0 + 0.001, end, ...attempts.map((a) => a.ended_ts ?? a.last_ts ?? t0));
    const span = t1 - t0;
    const x = (ts) => (((ts - t0) / span) * 100).toFixed(3) + "%";
    const compact = list.length > 150;
    const lanes = list.map(([d]) => {
      const bars = d.attempts.filter((a) => a.started_ts != null).map((a) => {
        const stop = a.ended_ts ?? (a.outcome || a.fenced ? a.last_ts : end) ?? end;
        const outcome = a.outcome || "open";
        const how = [a.id, outcome, secs(stop - a.started_ts)];
        if (a.killed) how.push("killed: " + a.killed + (a.kill_latency_s != null ? " in " + secs(a.kill_latency_s) : ""));
        if (a.reattached) how.push("picked up again after a restart");
        if (a.then) how.push("then " + a.then);
        let marks = "";
        const hit = a.timed_out_after_s ?? a.stale_after_s;
        if (hit != null) marks += `<span class="tick" style="left:${x(a.started_ts + hit)}" title="${esc(a.id)}: ${a.timed_out_after_s != null ? "deadline" : "stale"} after ${secs(hit)}"></span>`;
        if (a.killed && a.ended_ts != null) marks += `<span class="tick kill" style="left:${x(a.ended_ts)}" title="${esc(a.id)}: killed (${esc(a.killed)})"></span>`;
        const width = Math.max(0, ((stop - a.started_ts) / span) * 100).toFixed(3);
        const tools = compact ? "" : (a.tools || []).map((c) => toolMark(a, c, stop, x, span)).join("");
        return `<a class="bar o-${cls(outcome)}" data-attempt="${esc(a.id)}" tabindex="-1" href="#d/${encodeURIComponent(d.id)}" ` +
          `style="left:${x(a.started_ts)};width:${width}%" title="${esc(how.join(", "))}"></a>${marks}${tools}`;
      }).join("");
      return `<div class="lane"><div class="label" title="${esc(d.id)}">${compact ? "" : esc(d.id)}</div><div class="track">${bars}</div></div>`;
    }).join("");
    const ticks = [];
    const step = niceStep(span / 8);
    for (let s = 0; s <= span + 1e-9; s += step) ticks.push(`<span style="left:${((s / span) * 100).toFixed(2)}%">${s.toFixed(step < 1 ? 1 : 0)}s</span>`);
    const label = compact ? "0.5rem" : "9rem";
    $("timeline-body").innerHTML = `<div class="tl ${compact ? "compact" : ""}" style="--lane:${compact ? 4 : 18}px;--label:${label}">` +
      `<div class="tl-axis">${ticks.join("")}</div>${lanes}</div>`;
  }

  // One tool call on its attempt's bar: a span from its start to its end (to now while in
  // flight, to the attempt's end when that cut it short), or a tick at its end when only
  // its end is known; one with side effects marked.
  function toolMark(a, c, stop, x, span) {
    const open = c.ended_ts == null;
    const running = open && !a.outcome && !a.fenced;
    const phase = c.started_ts == null ? "end" : running ? "in-flight" : open ? "cut" : "done";
    const words = [a.id + ": " + c.tool + (c.side_effects ? " (side effects)" : "")];
    if (phase === "end") words.push("seen only once it was over");
    else if (phase === "in-flight") words.push("in flight for " + secs(now() - c.started_ts));
    else if (phase === "cut") words.push("cut short by the attempt's end");
    else words.push(secs(c.duration_s ?? c.ended_ts - c.started_ts));
    const at = c.started_ts ?? c.ended_ts;
    const width = phase === "end" ? "" : `;width:${Math.max(0, (((open ? stop : c.ended_ts) - at) / span) * 100).toFixed(3)}%`;
    return `<span class="tool ${phase}${c.side_effects ? " writes" : ""}" data-attempt="${esc(a.id)}" data-tool="${esc(c.tool)}" ` +
      `data-phase="${phase}" style="left:${x(at)}${width}" title="${esc(words.join(", "))}"></span>`;
  }

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-3))));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }

  // -- timeouts ---------------------------------------------------------------------------
  function table(headers, rows) {
    if (!rows.length) return `<p class="muted">None.</p>`;
    return `<table><thead><tr>${headers.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead><tbody>` +
      rows.map((r) => `<tr>${r.map((c) => `<td${typeof c === "number" ? ' class="num"' : ""}>${c}</td>`).join("")}</tr>`).join("") +
      `</tbody></table>`;
  }

  function renderTimeouts(t) {
    const link = (id) => `<a class="id" href="#d/${encodeURIComponent(id)}">${esc(id)}</a>`;
    const yes = (v) => (v == null ? "?" : v ? "yes" : "no");
    $("tracking").innerHTML = table(["Agent", "Delegation", "Timeout", "Status", "Partial OK?", "Elapsed", "Attempts"],
      t.tracking.map((r) => [esc(r.agent), link(r.delegation_id), r.timeout_s == null ? "-" : esc(r.timeout_s + "s"),
        `<span class="s-${cls(r.status)}">${MARKS[r.status] || "•"} ${esc(r.status.replace(/_/g, " "))}</span>`,
        yes(r.partial_ok), secs(r.elapsed_s), r.attempts]));
    $("timeout-log").innerHTML = table(["Time", "Delegation", "Attempt", "Agent", "Kind", "After", "Deadline", "Then"],
      t.timeouts.map((e) => [clock(e.ts), link(e.delegation_id), esc(e.attempt_id), esc(e.agent), esc(e.kind),
        secs(e.elapsed_s), secs(e.deadline_s), esc(e.then || "-")]));
  }

  function renderOverview() {
    const t = state.tree;
    if (!t) return;
    const started = performance.now();
    const q = $("filter").value.trim().toLowerCase();
    const list = ordered(t.delegations).filter(([d]) => matches(d, q));
    const held = document.activeElement && document.activeElement.closest("#tree-rows .row");
    renderTree(t, list);
    if (held) { // a redraw keeps the keyboard's place
      const again = document.querySelector(`#tree-rows .row[data-id="${CSS.escape(held.dataset.id)}"] a.id`);
      if (again) again.focus({ preventScroll: true });
    }
    renderTimeline(t, list);
    renderTimeouts(t);
    renderHosts();
    $("source").textContent = t.source;
    const r = t.run;
    $("runinfo").textContent = `run ${r.index} of ${r.of} · ${r.events} events · ` +
      (r.stopped_ts != null ? "stopped" : r.owner_gone ? "its Zeus is gone (the store's owner died)" : "running") +
      (r.intensity_exceeded.length ? " · restart intensity exceeded" : "");
    $("notes-box").hidden = !t.notes.length;
    $("notes").innerHTML = t.notes.map((n) => `<li>${esc(n)}</li>`).join("");
    state.renders += 1;
    state.lastRenderMs = performance.now() - started;
    if (state.firstRenderAt == null) { // since navigation, and the drawing's own share
      state.firstRenderAt = performance.now();
      state.firstRenderMs = state.lastRenderMs;
    }
  }

  // -- a delegation's page ------------------------------------------------------------------
  function facts(pairs) {
    return `<dl class="facts">${pairs.filter(([, v]) => v != null && v !== "").map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join("")}</dl>`;
  }

  function stopped(a) {
    const how = [];
    if (a.reattached) how.push("picked up again after a restart");
    if (a.timed_out_after_s != null) how.push(`deadline after ${secs(a.timed_out_after_s)}`);
    if (a.stale_after_s != null) how.push(`stale after ${secs(a.stale_after_s)}`);
    if (a.budget_exceeded) how.push("over budget");
    if (a.killed) how.push(`killed: ${a.killed}${a.kill_latency_s != null ? " in " + secs(a.kill_latency_s) : ""}`);
    if (a.fenced) how.push(`fenced: ${a.fenced}`);
    return how.join(", ") || "-";
  }

  function renderDetail() {
    const d = state.detail;
    const box = $("detail");
    if (!d) return;
    if (d.error_text) { box.innerHTML = `<p><a href="#">← back</a></p><p>${esc(d.error_text)}</p>`; return; }
    const s = d.summary;
    const pol = d.policy || {};
    const summary = s ? facts([["status", `<span class="s-${cls(s.status)}">${MARKS[s.status] || ""} ${esc(s.status)}</span>`],
      ["duration", secs(s.duration_s)], ["attempts", esc(s.attempts)], ["timeout", esc(s.timeout_kind)],
      ["error", s.error ? `<pre>${esc(s.error)}</pre>` : null],
      ["usage", s.usage ? `<span class="mono">${esc(JSON.stringify(s.usage))}</span>` : null]])
      : facts([["status", esc(d.status)], ["open for", secs(d.open && d.open.since_s)], ["attempt", esc(d.open && d.open.attempt)]]);
    const attempts = table(["#", "Attempt", "Agent", "Outcome", "Started", "Ran", "How it stopped", "Last tool",
      "Tool calls", "Last note", "Progress", "Partials", "Bad lines", "Session", "Then", "Error"],
      d.attempts.map((a) => [a.number ?? "-", esc(a.id), esc(a.agent), `<span class="swatch o-${cls(a.outcome || "open")}"></span>${esc(a.outcome || "open")}`,
        clock(a.started_ts), secs(a.duration_s ?? (a.started_ts != null ? (a.ended_ts ?? now()) - a.started_ts : null)),
        esc(stopped(a)), esc(inFlight(a) || a.last_tool || "-"), a.tool_calls ?? "-", esc(a.note || "-"),
        esc(a.progress == null ? "-" : JSON.stringify(a.progress)), a.partials, a.bad_lines ?? "-",
        esc(a.session_id || "-"), esc(a.then || "-"),
        esc(a.error || "")]));
    const children = d.children.map((c) => `<a class="id" href="#d/${encodeURIComponent(c)}">${esc(c)}</a>`).join(", ");
    const events = table(["Time", "Event", "Attempt", "Details"], d.events.map((e) => {
      const rest = Object.fromEntries(Object.entries(e).filter(([k]) =>
        !["ts", "event", "delegation_id", "attempt_id", "parent_id", "agent", "policy"].includes(k) && e[k] != null));
      return [clock(e.ts), esc(e.event), esc(e.attempt_id || ""), `<span class="mono">${esc(JSON.stringify(rest))}</span>`];
    }));
    box.innerHTML = `<p><a href="#" id="back">← the tree</a> <kbd>Esc</kbd></p>` +
      `<h2><span class="mark s-${cls(d.status)}">${MARKS[d.status] || "•"}</span> <span class="id">${esc(d.id)}</span> ` +
      `<span class="muted">${esc(d.agents.join(" → "))}</span></h2>` +
      facts([["host", d.host ? `<span class="id" title="${esc(d.host)}">${esc(short(d.host))}</span>` : null],
        ["parent", d.parent_id ? `<a class="id" href="#d/${encodeURIComponent(d.parent_id)}">${esc(d.parent_id)}</a>` : null],
        ["delegated to", children || null], ["timeout", d.timeout_s != null ? secs(d.timeout_s) : null],
        ["partial OK", d.partial_ok == null ? null : d.partial_ok ? "yes" : "no"],
        ["retries allowed", pol.retry ? esc(pol.retry.max_retries) : null], ["fallback", esc(pol.fallback)],
        ["budget", Object.keys(d.budget).length ? `<span class="mono">${esc(JSON.stringify(d.budget))}</span>` : null],
        ["cancel", d.cancel_requested ? esc(d.cancel_reason || "requested") : null],
        ["settled by hand", d.resolved ? esc(`by ${d.resolved.by}` + (d.resolved.note ? `: ${d.resolved.note}` : "")) : null]]) +
      `<h3>Brief</h3><pre>${esc(d.scope || "")}</pre>` +
      `<h3>${s ? "Settlement" : "Open"}</h3>${summary}` +
      `<h3>Attempts</h3><div class="scroll">${attempts}</div>` +
      `<h3>Partial results (${d.partial_results.length})</h3>` +
      (d.partial_results.length ? `<pre>${esc(d.partial_results.map((p) => `[${p.attempt_id}] ${typeof p.item === "string" ? p.item : JSON.stringify(p.item)}`).join("\n"))}</pre>` : `<p class="muted">None.</p>`) +
      `<h3>Events (${d.events.length})</h3><div class="scroll events">${events}</div>`;
    state.renders += 1;
  }

  // -- routing, refreshing, following ------------------------------------------------------
  const route = () => {
    const m = location.hash.match(/^#d\/(.+)$/);
    return m ? decodeURIComponent(m[1]) : null;
  };

  let inflight = false;
  let dirty = false;
  async function refresh() {
    if (inflight) { dirty = true; return; }
    inflight = true;
    try {
      do {
        dirty = false;
        const t = await getJson("/api/tree");
        state.skew = t.now - Date.now() / 1000;
        state.tree = t;
        badge();
        const id = route();
        if (id) {
          try { state.detail = await getJson("/api/delegations/" + encodeURIComponent(id)); } catch (err) { state.detail = { error_text: String(err.message || err) }; }
        }
        show();
        if (t.delegations.length > 2000) await new Promise((r) => setTimeout(r, 250)); // a big tree: at most 4 fetches a second
      } while (dirty);
    } catch (err) {
      $("live").textContent = "error: " + (err.message || err);
      $("live").className = "live off";
    } finally { inflight = false; }
  }

  function show() {
    const id = route();
    $("overview").hidden = !!id;
    $("tabs").hidden = !!id;
    $("detail").hidden = !id;
    if (id) renderDetail(); else renderOverview();
  }

  // The badge: "live" only while what the page shows can still change, never once the
  // source's Zeus has stopped or its store's owner is dead.
  function badge() {
    const run = state.tree && state.tree.run;
    if (run && run.owner_gone) {
      $("live").textContent = run.stopped_ts != null ? "stopped" : "its Zeus is gone";
      $("live").className = "live ended";
    } else if (state.connected) {
      $("live").textContent = "live";
      $("live").className = "live on";
    }
  }

  function follow() {
    const source = new EventSource("/api/events" + (token ? "?token=" + encodeURIComponent(token) : ""));
    source.addEventListener("ready", () => {
      state.connected = true;
      badge();
      refresh();
    });
    source.onmessage = (m) => {
      state.events += 1;
      try { const e = JSON.parse(m.data); if (typeof e.ts === "number") state.lags.push(Date.now() / 1000 - e.ts); } catch (_) { /* not an event */ }
      if (state.lags.length > 1000) state.lags.splice(0, 500);
      refresh();
    };
    source.addEventListener("hosts", () => refresh()); // a lease renewed, released or taken
    source.addEventListener("reset", () => { source.close(); refresh(); follow(); });
    source.onerror = () => {
      state.connected = false;
      if (state.tree && state.tree.run.owner_gone) return; // nothing more would come anyway
      $("live").textContent = "reconnecting";
      $("live").className = "live off";
    };
  }

  // -- the keyboard ---------------------------------------------------------------------------
  document.addEventListener("keydown", (e) => {
    const typing = e.target instanceof HTMLInputElement;
    if (e.key === "Escape") {
      if (typing) { e.target.blur(); return; }
      if (route()) { location.hash = "#tree"; }
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "/") { e.preventDefault(); $("filter").focus(); return; }
    const jump = { 1: "#tree", 2: "#timeline", 3: "#timeouts", 4: "#hosts" }[e.key];
    if (jump && !route() && !document.querySelector(jump).hidden) { document.querySelector(jump).scrollIntoView(); return; }
    if (e.key === "j" || e.key === "k" || e.key === "ArrowDown" || e.key === "ArrowUp") {
      if (route()) return;
      const links = [...document.querySelectorAll("#tree-rows .row a.id")];
      if (!links.length) return;
      const at = links.indexOf(document.activeElement);
      const down = e.key === "j" || e.key === "ArrowDown";
      const next = links[Math.max(0, Math.min(links.length - 1, at < 0 ? 0 : at + (down ? 1 : -1)))];
      e.preventDefault();
      next.focus();
      next.scrollIntoView({ block: "nearest" });
    }
  });

  $("filter").addEventListener("input", () => renderOverview());
  window.addEventListener("hashchange", () => {
    if (route()) { state.detail = null; $("detail").innerHTML = `<p class="muted">Loading…</p>`; show(); refresh(); }
    else { show(); if (location.hash.length > 1) { const el = document.querySelector(location.hash); if (el) el.scrollIntoView(); } }
  });
  // Open attempts' deadline bars move with the clock while the run goes on.
  setInterval(() => {
    const t = state.tree;
    if (t && !t.run.owner_gone && t.delegations.length <= 2000 && !route()) renderOverview();
  }, 1000);
  follow();
  refresh();
})();
