// A Server-Sent Events client built on fetch. EventSource cannot send an
// Authorization header (a token would have to go in the URL, where logs and
// history keep it) and hides the response: its status, the problem document
// of a refusal, the Mercure-Last-Event-ID header of a resume. This client
// parses the stream as the HTML standard says, reconnects as EventSource
// does (after the retry delay, with the Last-Event-ID header), and says
// each time what happened.

const defaultRetry = 3000; // ms, as browsers' EventSource

// openStream subscribes at url and keeps subscribing until stop() is
// called or the hub refuses for good. cursor is the last_event_id that
// url carries, if any. headers() gives the request headers of each
// connection (read each time: a new token is used at the next one).
// onevent({id, type, data, retry}) gets each event, onnote({kind, text})
// each change of state: "connecting", "open", "retry", "refused";
// onrefused(), when given, is asked after a 401 whether to try again (it
// got a new token).
export function openStream({ url, cursor = "", headers = () => ({}), onevent, onnote, onrefused }) {
  let lastId = ""; // the stream's last event id
  let retry = defaultRetry;
  let stopped = false;
  let controller = null;
  let timer = 0;
  let keepAlives = 0;
  let renewals = 0; // new tokens tried since the stream was last open

  const note = (kind, text, extra = {}) => { if (!stopped || kind === "refused") onnote({ kind, text, ...extra }); };

  async function connect() {
    if (stopped) return;
    controller = new AbortController();
    const sent = lastId || cursor;
    const h = { Accept: "text/event-stream", ...headers() };
    if (lastId) h["Last-Event-ID"] = lastId; // beats the query's last_event_id
    note("connecting", sent ? `connecting with cursor ${sent}` : "connecting");
    let res;
    try {
      res = await fetch(url, { headers: h, signal: controller.signal, cache: "no-store", credentials: "same-origin" });
    } catch (err) {
      if (!stopped) later(`cannot connect (${err.message})`);
      return;
    }
    const type = res.headers.get("Content-Type") || "";
    if (res.status !== 200 || !type.startsWith("text/event-stream")) {
      const why = await describeRefusal(res);
      const wait = retryAfter(res);
      if (wait !== null) {
        later(`refused, ${why}`, wait);
      } else if (res.status === 401 && onrefused && renewals++ === 0 && await onrefused()) {
        later(`refused, ${why}; trying again with a new token`, 0);
      } else {
        stopped = true;
        note("refused", `refused: ${why}. Not reconnecting (EventSource gives up too).`, { status: res.status });
      }
      return;
    }
    renewals = 0;
    note("open", describeOpen(sent, res.headers.get("Mercure-Last-Event-ID")));
    try {
      await read(res.body);
      if (!stopped) later("the hub ended the stream");
    } catch (err) {
      if (!stopped) later(`the stream broke (${err.message})`);
    }
  }

  function later(why, ms = retry) {
    const c = lastId || cursor;
    note("retry", `${why}; reconnecting in ${ms} ms ` +
      (c ? `with cursor ${c}` : "without a cursor (no event received yet)"));
    timer = setTimeout(connect, ms);
  }

  // read parses the body into events, line by line.
  async function read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let id = lastId, type = "", data = [], evRetry = null;
    const line = (l) => {
      if (l === "") { // dispatch
        lastId = id;
        if (data.length) onevent({ id, type: type || "message", data: data.join("\n"), retry: evRetry });
        type = ""; data = []; evRetry = null;
        return;
      }
      if (l[0] === ":") { keepAlives++; return; } // a comment: the keep-alive
      const colon = l.indexOf(":");
      const name = colon < 0 ? l : l.slice(0, colon);
      let value = colon < 0 ? "" : l.slice(colon + 1);
      if (value[0] === " ") value = value.slice(1);
      switch (name) {
        case "id": if (!value.includes("\0")) id = value; break;
        case "event": type = value; break;
        case "data": data.push(value); break;
        case "retry": if (/^\d+$/.test(value)) { retry = Number(value); evRetry = retry; } break;
      }
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      // A CR at the end may be the first half of a CRLF: wait for more.
      const cut = buf.endsWith("\r") ? buf.length - 1 : buf.length;
      const lines = buf.slice(0, cut).split(/\r\n|\r|\n/);
      buf = lines.pop() + buf.slice(cut);
      lines.forEach(line);
    }
  }

  connect();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (controller) controller.abort();
    },
    get keepAlives() { return keepAlives; },
  };
}

// describeOpen says what the hub did with the cursor sent, from its
// Mercure-Last-Event-ID answer.
function describeOpen(sent, hubCursor) {
  if (!sent) return "connected: live events only (no cursor sent)";
  if (hubCursor === null) return `connected with cursor ${sent}, but the hub sent no Mercure-Last-Event-ID`;
  if (sent === "earliest") return "connected from earliest: the hub replays the history it kept, then goes live";
  if (hubCursor === sent) return `resumed after ${sent}: the hub found it (Mercure-Last-Event-ID: ${hubCursor}) and replays what followed`;
  if (hubCursor === "earliest") return `the hub does not know the cursor ${sent} (never one of its ids, or dropped from its history): ` +
    "Mercure-Last-Event-ID: earliest. Events may have been missed.";
  return `connected with cursor ${sent}; Mercure-Last-Event-ID: ${hubCursor}`;
}

// retryAfter is how long to wait after a refusal that passes (429, 502 to
// 504), in ms; null for one that does not.
function retryAfter(res) {
  if (res.status !== 429 && (res.status < 502 || res.status > 504)) return null;
  const s = Number(res.headers.get("Retry-After"));
  return Number.isFinite(s) && s > 0 ? s * 1000 : defaultRetry;
}

// describeRefusal says why the hub refused: status, the problem document's
// detail, and the Bearer challenge's error.
export async function describeRefusal(res) {
  let detail = "";
  try {
    const p = await res.json();
    detail = p.detail || p.title || "";
  } catch { /* not a problem document */ }
  const code = /error="([^"]*)"/.exec(res.headers.get("WWW-Authenticate") || "");
  let s = String(res.status);
  if (detail) s += ` ${detail}`;
  if (code) s += ` (${code[1]})`;
  return s;
}
