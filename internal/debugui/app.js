// The debugger page. It talks to the hub as any client does, through the
// hub's own endpoints, with the token typed in (sent in the Authorization
// header, never in a URL) or else the browser's cookie or the
// application's session: it sees what they allow, nothing more.
import { openStream, describeRefusal } from "./sse.js";
import { sparkline } from "./chart.js";

const $ = (id) => document.getElementById(id);
const cfg = document.body.dataset; // hubUrl, hubPath, activityTopic, subscriptions, playground

// The hub endpoint as this page reached it (the page's path without
// /debug/…), whatever prefix a proxy added or stripped.
const endpoint = location.pathname.replace(/\/debug\/[^/]*$/, "") || "/";
const under = (p) => endpoint.replace(/\/$/, "") + p;

const maxRows = 500; // events kept in the list; older ones drop off

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
}

function auth(field) {
  const t = $(field).value.trim();
  return t ? { Authorization: "Bearer " + t } : {};
}

function setStatus(id, text, kind = "") {
  const s = $(id);
  s.textContent = text;
  s.className = "status " + kind;
}

const time = (d) => d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");

// ---- Subscribe -------------------------------------------------------

const matcherTypes = [["match", "exact"], ["match_urlpattern", "URL pattern"]];

function addMatcher(type = "match", value = "") {
  const sel = el("select", { "aria-label": "Matcher type" },
    ...matcherTypes.map(([v, t]) => el("option", { value: v, selected: v === type }, t)));
  const input = el("input", { value, "aria-label": "Matcher", placeholder: "a topic, * or a URL pattern", spellcheck: false, autocomplete: "off" });
  const row = el("div", { class: "matcher" }, sel, input);
  const remove = el("button", { type: "button", "aria-label": "Remove this matcher", title: "Remove this matcher" }, "×");
  remove.addEventListener("click", () => {
    if ($("matchers").children.length > 1) row.remove();
    else input.value = "";
  });
  row.append(remove);
  $("matchers").append(row);
  return input;
}

function formMatchers() {
  return [...$("matchers").children]
    .map((row) => ({ type: row.querySelector("select").value, value: row.querySelector("input").value.trim() }))
    .filter((m) => m.value !== "");
}

let stream = null;
let streamMatchers = [];

function subscribe() {
  unsubscribe();
  const ms = formMatchers();
  if (!ms.length) {
    setStatus("sub-status", "Add a matcher first.", "bad");
    return;
  }
  const q = new URLSearchParams();
  for (const m of ms) q.append(m.type, m.value);
  const cursor = $("last-event-id").value.trim();
  if (cursor) q.set("last_event_id", cursor);
  // The page's own URL holds the subscription (never a token): a link to it
  // opens the page subscribed.
  history.replaceState(null, "", "?" + q);
  $("share").href = "?" + q;
  streamMatchers = ms;
  $("unsubscribe").disabled = false;
  stream = openStream({
    url: endpoint + "?" + q,
    cursor,
    headers: () => auth("sub-token"),
    onevent: receive,
    onnote: (n) => {
      const kind = n.kind === "open" ? "ok" : n.kind === "refused" ? "bad" : "";
      setStatus("sub-status", n.text, kind);
      if (n.kind !== "connecting") addRow(el("li", { class: "sys " + kind }, `${time(new Date())} — ${n.text}`));
      if (n.kind === "refused") $("unsubscribe").disabled = true;
    },
    onrefused: playgroundRenewed,
  });
}

function unsubscribe() {
  if (!stream) return;
  stream.stop();
  stream = null;
  $("unsubscribe").disabled = true;
  setStatus("sub-status", "Not subscribed.");
  addRow(el("li", { class: "sys" }, `${time(new Date())} — unsubscribed`));
}

// ---- Events ----------------------------------------------------------

let paused = false;
const held = []; // events that arrived while paused, maxRows at most
let dropped = 0; // events dropped while paused, past maxRows
const published = new Map(); // id -> topics, of the updates this page published

function receive(ev) {
  ev.at = new Date();
  if (paused) {
    held.push(ev);
    if (held.length > maxRows) { held.shift(); dropped++; }
    $("pause").textContent = `Resume (${held.length + dropped} new)`;
    return;
  }
  addRow(eventRow(ev));
}

// topicsOf says what the page knows of an event's topics: the stream
// carries none.
function topicsOf(ev) {
  const mine = published.get(ev.id);
  if (mine) return [mine.join(", "), "published from this page"];
  if (ev.type === "mercure") {
    try {
      const doc = JSON.parse(ev.data);
      if (doc && typeof doc.id === "string") return [doc.id, "a subscription event: its topic is in its data"];
    } catch { /* not a subscription document */ }
  }
  if (streamMatchers.length === 1) {
    const m = streamMatchers[0];
    if (m.value === "*") return ["not sent", "matched by *"];
    return [m.value, m.type === "match" ? "the topic your matcher names; the update may have others"
      : "matched by your URL pattern; the topic itself is not sent"];
  }
  return ["not sent", `one of your ${streamMatchers.length} matchers selected it`];
}

function pretty(data) {
  try {
    const v = JSON.parse(data);
    if (v !== null && typeof v === "object") return JSON.stringify(v, null, 2);
  } catch { /* not JSON */ }
  return data;
}

function dataBlock(data) {
  if (data === "") return el("pre", { class: "empty" }, "(empty data)");
  const text = pretty(data);
  const lines = text.split("\n");
  if (text.length <= 600 && lines.length <= 12) return el("pre", {}, text);
  const flat = data.replace(/\s+/g, " ");
  const preview = flat.length > 80 ? flat.slice(0, 80) + "…" : flat;
  return el("details", {}, el("summary", {}, `${preview} (${data.length} characters, ${lines.length} lines)`), el("pre", {}, text));
}

function topicsLine(ev) {
  const [topics, why] = topicsOf(ev);
  return el("div", { class: "topics" }, "topics: ", el("span", { class: "mono" }, topics), " ", el("span", { class: "why" }, `(${why})`));
}

function eventRow(ev) {
  const li = el("li", { class: "event" },
    el("div", { class: "head" },
      el("span", { class: "mono" }, time(ev.at)),
      el("span", { class: "type" }, ev.type),
      el("span", { class: "id" }, "id: " + ev.id),
      ev.retry !== null ? el("span", {}, `retry: ${ev.retry} ms`) : null),
    topicsLine(ev),
    dataBlock(ev.data));
  li.dataset.id = ev.id;
  return li;
}

function addRow(li) {
  const list = $("events");
  list.prepend(li);
  filterRow(li);
  while (list.children.length > maxRows) list.lastElementChild.remove();
}

function filterRow(li) {
  const q = $("filter").value.trim().toLowerCase();
  li.hidden = li.classList.contains("event") && q !== "" && !li.textContent.toLowerCase().includes(q);
}

// ---- Publish ---------------------------------------------------------

async function publish() {
  const topics = $("pub-topics").value.split("\n").map((s) => s.trim()).filter(Boolean);
  const body = new URLSearchParams();
  for (const t of topics) body.append("topic", t);
  if ($("pub-data").value !== "") body.set("data", $("pub-data").value);
  if ($("pub-private").checked) body.set("private", "on");
  for (const [id, name] of [["pub-id", "id"], ["pub-type", "type"], ["pub-retry", "retry"]]) {
    const v = $(id).value.trim();
    if (v !== "") body.set(name, v);
  }
  setStatus("pub-result", "Publishing…");
  let res;
  try {
    res = await fetch(endpoint, { method: "POST", body, headers: auth("pub-token"), credentials: "same-origin", cache: "no-store" });
  } catch (err) {
    setStatus("pub-result", `Not sent: ${err.message}`, "bad");
    return;
  }
  if (!res.ok) {
    setStatus("pub-result", `Refused: ${await describeRefusal(res)}`, "bad");
    return;
  }
  const id = await res.text();
  published.set(id, topics);
  if (published.size > 200) published.delete(published.keys().next().value);
  setStatus("pub-result", `Published: ${id}`, "ok");
  // The event may have arrived before the answer.
  for (const li of $("events").querySelectorAll("li.event")) {
    if (li.dataset.id === id) li.querySelector(".topics").replaceWith(topicsLine({ id, type: "", data: "" }));
  }
}

// ---- Active subscriptions --------------------------------------------

const subscribers = new Map(); // subscriber -> {payload, subs: Map(id -> subscription)}
let subsStream = null;
let subsGen = 0; // of the latest load: an earlier one still running gives up

function applySubscription(s) {
  let entry = subscribers.get(s.subscriber);
  if (s.active) {
    if (!entry) subscribers.set(s.subscriber, entry = { payload: s.payload, subs: new Map() });
    entry.payload = s.payload;
    entry.subs.set(s.id, s);
  } else if (entry) {
    entry.subs.delete(s.id);
    if (entry.subs.size === 0) subscribers.delete(s.subscriber);
  }
}

function renderSubscribers() {
  const items = [...subscribers.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([id, e]) =>
    el("li", {},
      el("div", { class: "mono" }, id),
      e.payload !== undefined ? el("pre", {}, JSON.stringify(e.payload, null, 2)) : null,
      el("ul", {}, ...[...e.subs.values()].map((s) => el("li", {}, `${s.match_type} `, el("span", { class: "mono" }, s.match))))));
  $("subscribers").replaceChildren(...items);
  if (!items.length) $("subscribers").append(el("li", {}, "Nobody is subscribed."));
}

async function loadSubscriptions() {
  const gen = ++subsGen;
  if (subsStream) subsStream.stop();
  subsStream = null;
  subscribers.clear();
  $("subscribers").replaceChildren();
  if (cfg.subscriptions !== "true") {
    setStatus("subs-status", "Active subscriptions are off on this hub (WithSubscriptions; the standalone's -subscriptions).");
    return;
  }
  let res;
  try {
    res = await fetch(under("/subscriptions"), { headers: auth("sub-token"), credentials: "same-origin", cache: "no-store" });
  } catch (err) {
    if (gen === subsGen) setStatus("subs-status", `Cannot list them: ${err.message}`, "bad");
    return;
  }
  if (gen !== subsGen) return;
  if (!res.ok) {
    setStatus("subs-status", "Who is connected is private: the hub lists it to a token or session granting subscribe on " +
      `${cfg.hubPath}/subscriptions. Refused: ${await describeRefusal(res)}`, "bad");
    return;
  }
  const doc = await res.json();
  if (gen !== subsGen) return;
  doc.subscriptions.forEach(applySubscription);
  renderSubscribers();
  // The list's cursor: the events that follow it keep the list current.
  const cursor = /last-event-id="([^"]*)"/.exec(res.headers.get("Link") || "");
  const q = new URLSearchParams({ match_urlpattern: `${cfg.hubPath}/subscriptions/:type/:match/:subscriber` });
  if (cursor) q.set("last_event_id", cursor[1]);
  subsStream = openStream({
    url: endpoint + "?" + q,
    cursor: cursor ? cursor[1] : "",
    headers: () => auth("sub-token"),
    onevent: (ev) => {
      if (ev.type !== "mercure") return;
      applySubscription(JSON.parse(ev.data));
      renderSubscribers();
    },
    onnote: (n) => {
      if (n.kind === "open") setStatus("subs-status", "Live.", "ok");
      else if (n.kind === "refused") setStatus("subs-status", n.text, "bad");
      else if (n.kind === "retry") setStatus("subs-status", n.text);
    },
    onrefused: playgroundRenewed,
  });
}

// ---- Activity --------------------------------------------------------

const activity = { samples: [], after: 0, timer: 0, gen: 0, labels: null, interval: 1000, slots: 300 };

// reloadActivity starts polling the activity afresh (with the current
// token); a poll of an earlier start gives up.
function reloadActivity() {
  clearTimeout(activity.timer);
  activity.samples = [];
  activity.after = 0;
  pollActivity(++activity.gen);
}

async function pollActivity(gen) {
  let res;
  try {
    res = await fetch(`activity?after=${activity.after}`, { headers: auth("sub-token"), credentials: "same-origin", cache: "no-store" });
  } catch (err) {
    if (gen !== activity.gen) return;
    setStatus("activity-status", `Cannot reach the hub: ${err.message}; trying again.`, "bad");
    activity.timer = setTimeout(() => pollActivity(gen), 5000);
    return;
  }
  if (gen !== activity.gen) return;
  if (!res.ok) {
    setStatus("activity-status", `Refused: ${await describeRefusal(res)}`, "bad");
    $("activity").replaceChildren();
    activity.samples = [];
    activity.after = 0;
    return; // until the token changes, or Reload
  }
  const doc = await res.json();
  if (gen !== activity.gen) return;
  activity.interval = doc.interval_ms;
  activity.labels = { refused: doc.refused_labels, tokens: doc.token_failure_labels };
  if (doc.samples.length && doc.samples[0].seq <= activity.after) activity.samples = []; // a new hub
  activity.samples.push(...doc.samples);
  activity.samples.splice(0, activity.samples.length - activity.slots);
  if (activity.samples.length) activity.after = activity.samples[activity.samples.length - 1].seq;
  setStatus("activity-status", "");
  renderActivity();
  activity.timer = setTimeout(() => pollActivity(gen), activity.interval);
}

const sum = (a) => a.reduce((x, y) => x + y, 0);

function renderActivity() {
  const s = activity.samples;
  // One value per sample: a gauge as is, a counter as its increase since
  // the sample before (null across a gap in the samples).
  const delta = (f) => s.map((x, i) => (i > 0 && s[i - 1].seq === x.seq - 1 ? f(x) - f(s[i - 1]) : null));
  const perSecond = (f) => { const d = delta(f); return d.map((v, i) => (v === null ? null : v / Math.max(0.001, (s[i].t - s[i - 1].t) / 1000))); };
  const total = (f) => (s.length > 1 ? f(s[s.length - 1]) - f(s[0]) : 0);
  const refusedAll = (x) => sum(x.refused) + sum(x.token_failures);
  const series = [
    { key: "streams", label: "Streams open", values: s.map((x) => x.streams), sum: null },
    { key: "published", label: "Publishes/s", values: perSecond((x) => x.published), sum: total((x) => x.published) },
    { key: "deliveries", label: "Deliveries/s", values: perSecond((x) => x.deliveries), sum: total((x) => x.deliveries) },
    { key: "overflows", label: "Queue overflows", values: delta((x) => x.overflows), sum: total((x) => x.overflows) },
    { key: "replays", label: "Replays", values: delta((x) => x.replays), sum: total((x) => x.replays) },
    { key: "refusals", label: "Refusals", values: delta(refusedAll), sum: total(refusedAll), detail: refusalDetail() },
  ];
  // The chart spans what the hub kept, a minute at least.
  const slots = Math.min(activity.slots, Math.max(60, s.length));
  const span = s.length > 1 ? Math.round((s[s.length - 1].t - s[0].t) / 1000) : 0;
  const caption = el("p", { class: "hint" }, `The last ${span < 120 ? `${span} s` : `${Math.round(span / 60)} min`}, ` +
    `one point per sample; the latest on the right.`);
  $("activity").replaceChildren(caption, ...series.map((x) => seriesRow(x, slots)));
}

function seriesRow({ key, label, values, sum: windowSum, detail }, slots) {
  const known = values.filter((v) => v !== null);
  const last = known.length ? known[known.length - 1] : 0;
  const peak = known.length ? Math.max(...known) : 0;
  const fmt = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
  const summary = windowSum === null ? `peak ${fmt(peak)}` : `${windowSum} in the window, peak ${fmt(peak)}`;
  const row = el("div", { class: "series" },
    el("span", { class: "label" }, label),
    el("span", { class: "value", title: "latest" }, fmt(last)),
    sparkline(values, slots, `${label}: latest ${fmt(last)}, ${summary}`),
    el("span", { class: "detail" }, summary + (detail ? ` · ${detail}` : "")));
  row.dataset.series = key;
  row.dataset.peak = String(peak);
  if (windowSum !== null) row.dataset.sum = String(windowSum);
  return row;
}

// refusalDetail lists the refusals of the window by reason.
function refusalDetail() {
  const s = activity.samples;
  if (s.length < 2 || !activity.labels) return "";
  const first = s[0], last = s[s.length - 1];
  const parts = [];
  activity.labels.refused.forEach((l, i) => {
    const n = last.refused[i] - first.refused[i];
    if (n > 0) parts.push(`publish ${l} ×${n}`);
  });
  activity.labels.tokens.forEach((l, i) => {
    const n = last.token_failures[i] - first.token_failures[i];
    if (n > 0) parts.push(`token ${l} ×${n}`);
  });
  return parts.length ? parts.join(", ") : "none";
}

// ---- Playground ------------------------------------------------------

let playgroundToken = "";
let playgroundTimer = 0;

// renewPlayground fetches a playground token into the token fields that
// hold the previous one (or nothing); it reports whether it got a new one.
async function renewPlayground() {
  if (cfg.playground !== "true") return false;
  clearTimeout(playgroundTimer);
  let res;
  try {
    res = await fetch("token", { method: "POST", credentials: "same-origin", cache: "no-store" });
  } catch (err) {
    $("playground").textContent = `The playground's token could not be fetched: ${err.message}`;
    playgroundTimer = setTimeout(renewPlayground, 10000);
    return false;
  }
  if (!res.ok) {
    $("playground").textContent = `The playground refused a token: ${await describeRefusal(res)}`;
    return false;
  }
  const { token, expires_in: ttl } = await res.json();
  for (const id of ["sub-token", "pub-token"]) {
    if ($(id).value === playgroundToken) $(id).value = token;
  }
  const renewed = token !== playgroundToken;
  playgroundToken = token;
  playgroundTimer = setTimeout(renewPlayground, ttl * 800); // before it expires
  return renewed;
}

const playgroundRenewed = () => (cfg.playground === "true" ? renewPlayground() : Promise.resolve(false));

// ---- Start -----------------------------------------------------------

function wire() {
  $("add-matcher").addEventListener("click", () => addMatcher().focus());
  $("sub-form").addEventListener("submit", (e) => { e.preventDefault(); subscribe(); });
  $("unsubscribe").addEventListener("click", unsubscribe);
  $("pub-form").addEventListener("submit", (e) => { e.preventDefault(); publish(); });
  $("pause").addEventListener("click", () => {
    paused = !paused;
    $("pause").setAttribute("aria-pressed", String(paused));
    $("pause").textContent = paused ? "Resume" : "Pause";
    if (paused) return;
    if (dropped) addRow(el("li", { class: "sys" }, `${dropped} events arrived while paused beyond the ${maxRows} the list keeps`));
    dropped = 0;
    held.splice(0).forEach((ev) => addRow(eventRow(ev)));
  });
  $("filter").addEventListener("input", () => [...$("events").children].forEach(filterRow));
  $("clear").addEventListener("click", () => $("events").replaceChildren());
  $("sub-token").addEventListener("change", () => { loadSubscriptions(); reloadActivity(); });
  $("subs-reload").addEventListener("click", loadSubscriptions);
  $("activity-reload").addEventListener("click", reloadActivity);
}

async function start() {
  wire();
  if (cfg.playground === "true") await renewPlayground();
  // The subscription in the page's own URL, if any, starts at once.
  const q = new URLSearchParams(location.search);
  let any = false;
  for (const [name, value] of q) {
    if (name === "match" || name === "match_exact" || name === "match_urlpattern") {
      addMatcher(name === "match_urlpattern" ? name : "match", value);
      any = true;
    }
  }
  if (q.has("last_event_id")) $("last-event-id").value = q.get("last_event_id");
  if (any) subscribe();
  else addMatcher();
  loadSubscriptions();
  reloadActivity();
}

start();
