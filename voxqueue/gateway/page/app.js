// The page: pairing, Talk (the microphone streamed to the gateway while the person speaks, the
// command ended by itself), the answer seen and heard as it streams, typed questions, and this
// device's announcements. State and counters are on #app's data attributes (data-state,
// data-samples-played, ...), for people reading the DOM and for the tests.

import { Gateway, Unauthorized } from "./gateway-api.js";
import { Microphone } from "./capture.js";
import { Command, SETTINGS, listensAgain } from "./endpointing.js";
import { Player } from "./player.js";
import { SpeakingOrder } from "./speaking-order.js";

const TOKEN_KEY = "voxqueue.token";
const REFUSED_KEY = "voxqueue.refused";  // the last token was refused: say so after a reload
const SESSION_IDLE_MS = 300_000;  // a new conversation after 5 minutes of quiet, as the edge
const REVOKED = "This page's device token was refused: the device was revoked, or the token "
  + "is wrong. Pair it again with a new link (voxqueue devices add NAME --link).";

const $ = (id) => document.getElementById(id);
const app = $("app");

let api = null;
let audio = null;  // {context, mic, player}, made at the first press (browsers want a gesture)
let listening = null;  // the command being spoken: {command, stream, view}
let current = null;  // the turn being followed: {turnId, abort, ended, interrupted}
let session = { id: null, lastAt: 0 };
let announcing = Promise.resolve();
const stats = { turns: 0, announcements: 0 };

// -- status ------------------------------------------------------------------------------------
function setState(state, message) {
  app.dataset.state = state;
  if (message !== undefined) $("status").textContent = message;
  $("talk").setAttribute("aria-pressed", String(state === "listening"));
}

function count(name, value) { app.dataset[name] = String(value); }

function countSamples() {
  if (!audio) return;
  count("samplesScheduled", audio.player.scheduled);
  count("samplesPlayed", audio.player.played);
}
setInterval(countSamples, 100);

// -- pairing -----------------------------------------------------------------------------------
function tokenFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    localStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", location.pathname + location.search);  // out of sight
  }
  return token;
}

function showPairing(message) {
  api = null;
  $("pairing").hidden = false;
  $("talk-area").hidden = true;
  $("paired").hidden = $("unpair").hidden = true;
  if (message) $("pairing-message").textContent = message;
  setState("unpaired", message ?? "Not paired.");
}

function revoked() {
  if (listening) finish("no-speech");  // dropped
  localStorage.removeItem(TOKEN_KEY);
  localStorage.setItem(REFUSED_KEY, "1");
  interrupt();
  showPairing(REVOKED);
}

async function pair(token) {
  api = new Gateway(token);
  setState("pairing", "Pairing…");
  let device;
  try {
    ({ device } = await api.whoami());
  } catch (error) {
    if (error instanceof Unauthorized) { revoked(); return; }
    setState("offline", `Cannot reach the gateway (${error.message}); trying again…`);
    setTimeout(() => pair(token), 3000);
    return;
  }
  localStorage.removeItem(REFUSED_KEY);
  $("pairing").hidden = true;
  $("talk-area").hidden = false;
  $("insecure").hidden = window.isSecureContext;
  $("paired").textContent = `Paired as ${device}`;
  $("paired").hidden = $("unpair").hidden = false;
  app.dataset.device = device;
  setState("ready", `Paired as ${device}. Press Talk or the space bar to speak.`);
  hearAnnouncements(api);
}

// -- audio ---------------------------------------------------------------------------------------
async function ensureAudio() {
  if (!audio) {
    const context = new AudioContext({ latencyHint: "interactive" });
    const player = new Player(context);
    const mic = new Microphone(context);
    mic.onFrame = heard;
    audio = { context, player, mic };
  }
  if (audio.context.state !== "running") await audio.context.resume();
  return audio;
}

function busy() { return Boolean(audio?.player.playing || (current && !current.ended)); }

/** Barge-in: silence the reply and cancel its turn. */
function interrupt() {
  audio?.player.stop();
  if (current && !current.ended) {
    current.interrupted = true;
    current.abort.abort();
    if (current.turnId && api) api.cancel(current.turnId).catch(() => {});
  }
}

// -- talking -------------------------------------------------------------------------------------
function sessionId() {
  const now = Date.now();
  if (!session.id || now - session.lastAt > SESSION_IDLE_MS) {
    session.id = `web-${now.toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  }
  session.lastAt = now;
  return session.id;
}

async function talk() {
  if (!api) return;
  if (listening) { finish("pressed"); return; }
  if (busy()) interrupt();
  await listen(SETTINGS.noSpeechS);
}

async function listen(noSpeechS) {
  const { mic } = await ensureAudio();
  if (listening) return;
  // The socket opens while the browser opens the microphone; frames flow from the first.
  const view = new TurnView();
  const stream = api.stream(sessionId());
  const mine = { command: new Command(SETTINGS, { noSpeechS }), stream, view };
  listening = mine;
  stream.socket.addEventListener("close", () => {  // refused (a limit) while listening
    if (listening !== mine) return;
    listening = null;
    mic.close();
    setState("ready", `The gateway ended the command: ${stream.error?.message ?? "closed"}`);
  });
  $("partial").textContent = "";
  setState("listening", "Listening…");
  try {
    await mic.open();
  } catch (error) {
    if (listening === mine) listening = null;
    stream.socket.close();
    view.remove();
    setState("ready", `The microphone is not available: ${error.message}`);
    return;
  }
  if (listening !== mine) mic.close();  // ended (a second press) while it opened
  let turn;
  try {
    turn = await stream.turn;
  } catch (error) {
    if (listening === mine) {
      listening = null;
      audio.mic.close();
    }
    view.remove();
    if (error instanceof Unauthorized || error.code === "unauthenticated") {
      await checkToken();
    } else {
      setState("ready", `The gateway refused the command: ${error.message}`);
    }
    return;
  }
  const outcome = await follow(turn, view, mine);
  if (listensAgain(outcome) && !listening && api) {
    await listen(SETTINGS.followUpS);  // a question was asked: listen for the answer
  }
}

/** A captured frame: to the gateway, and through the end-of-command decisions. */
function heard(frame) {
  if (!listening) return;
  listening.stream.write(frame);
  const why = listening.command.feed(frame);
  if (why) finish(why);
}

function finish(why) {
  const { command, stream, view } = listening;
  listening = null;
  audio.mic.close();
  count("endedBy", why);
  if (why === "no-speech") {
    stream.cancel();
    view.remove();
    setState("ready", "No speech heard.");
    return;
  }
  stream.end(command.spokenUntil);
  view.spoken = { voiceEndedAt: command.lastVoiceAt ?? performance.now(), endedAt: performance.now() };
  setState("thinking", "Thinking…");
}

async function checkToken() {
  try {
    await api.whoami();
    setState("ready", "The gateway closed the stream; try again.");
  } catch (error) {
    if (error instanceof Unauthorized) revoked();
    else setState("offline", `Cannot reach the gateway (${error.message}).`);
  }
}

// -- typed questions -----------------------------------------------------------------------------
async function ask(text) {
  if (!api || !text.trim()) return;
  if (listening) finish("pressed");
  if (busy()) interrupt();
  await ensureAudio();
  const view = new TurnView();
  view.you(text, false);
  setState("thinking", "Thinking…");
  let turn;
  try {
    turn = await api.ask(text, sessionId());
  } catch (error) {
    view.error(error.message);
    if (error instanceof Unauthorized) revoked();
    else setState("ready", `Refused: ${error.message}`);
    return;
  }
  await follow(turn, view, null);
}

// -- following a turn ------------------------------------------------------------------------------
/** Show and play a turn's events as they come; its status and reply once heard. */
async function follow(turn, view, capture) {
  const abort = new AbortController();
  const me = { turnId: turn.turn_id, abort, ended: false, interrupted: false };
  current = me;
  count("turnId", turn.turn_id);
  const { player } = audio;
  const order = new SpeakingOrder();
  const timing = new Timings();
  let status = null;
  let reply = null;
  player.begin();
  player.onFirstSound = (at) => {
    if (view?.spoken) {
      count("speechToSoundMs", Math.round(at - view.spoken.voiceEndedAt));
      count("endToSoundMs", Math.round(at - view.spoken.endedAt));
    }
    if (current === me && !listening) setState("speaking", "Answering…");
  };
  try {
    for await (const entry of api.events(turn.turn_id, abort.signal)) {
      const { type, data } = entry.event;
      timing.add(entry.event);
      if (type === "stt-partial") {
        if (capture && listening === capture) capture.command.partial(data);
        $("partial").textContent = data.text;
        view?.you(data.text, true);
        if (data.text) {  // what was heard so far, shown live
          count("partialsShown", Number(app.dataset.partialsShown ?? 0) + 1);
          count("lastPartial", data.text);
        }
      } else if (type === "stt-end") {
        $("partial").textContent = "";
        view?.you(data.text ?? "", false);
      } else if (type === "tool-start") {
        view?.toolStarted(data.call_id, data.name);
      } else if (type === "tool-end") {
        view?.toolEnded(data.call_id, data.name, data.arguments, data.ok, data.result ?? data.error);
      } else if (type === "tts-start") {
        view?.piece(Number(data.seq ?? 0), data.text ?? "");
      } else if (type === "reply") {
        if (!(data.apology && reply !== null)) reply = data.text ?? null;
        if (reply !== null) view?.reply(reply);
      } else if (type === "error") {
        view?.error(data.message ?? data.code);
      } else if (type === "run-end") {
        status = data.status;
      }
      for (const pcm of order.push(entry)) player.play(pcm);
    }
  } catch (error) {
    if (me.interrupted) { view?.interrupted(); return { status: "cancelled", interrupted: true }; }
    me.ended = true;
    if (error instanceof Unauthorized) { revoked(); return null; }
    view?.error(error.message);
    setState("ready", `Lost the turn: ${error.message}`);
    return null;
  }
  view?.timings(timing.table());
  await player.idle();
  me.ended = true;
  if (me.interrupted) { view?.interrupted(); return { status, reply, interrupted: true }; }
  stats.turns += 1;
  countSamples();
  count("turns", stats.turns);
  if (current === me && !listening && !view?.dropped) {
    setState("ready", status === "ok" ? "Ready." : `The turn ended: ${status}.`);
  }
  return { status, reply, interrupted: false };
}

/** The stages' times of one turn, from its events (as voxqueue.client.result.assemble). */
class Timings {
  constructor() { this.t = {}; this.seen = {}; }

  add(event) {
    const { type, data, ts } = event;
    const t = this.t;
    if (type === "stt-start") this.seen.stt = ts;
    else if (type === "stt-end" && this.seen.stt) t.stt = (ts - this.seen.stt) * 1000;
    else if (type === "llm-end") t.llm = (t.llm ?? 0) + Number(data.ms ?? 0);
    else if (type === "tool-end") t.tools = (t.tools ?? 0) + Number(data.ms ?? 0);
    else if (type === "tts-start") this.seen.tts ??= Number(data.started_at ?? ts);
    else if (type === "tts-chunk") this.seen.audio ??= ts;
    else if (type === "tts-end" && this.seen.tts) t.tts = (ts - this.seen.tts) * 1000;
    else if (type === "run-end") {
      t.total = Number(data.ms ?? 0);
      const created = ts - t.total / 1000;
      if (this.seen.audio) t["first audio"] = (this.seen.audio - created) * 1000;
    }
  }

  table() {
    const order = ["stt", "llm", "tools", "tts", "first audio", "total"];
    return order.filter((k) => k in this.t).map((k) => [k, `${Math.round(this.t[k])} ms`]);
  }
}

// -- the conversation on screen ---------------------------------------------------------------------
const LOG_KEPT = 50;  // turns and announcements on screen, newest first

function logged(item) {
  const log = $("log");
  log.prepend(item);
  while (log.children.length > LOG_KEPT) log.lastElementChild.remove();
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

class TurnView {
  constructor() {
    this.li = element("li", "turn");
    this.said = element("p", "you");
    this.tools = element("ul", "tools");
    this.answer = element("p", "reply");
    this.pieces = new Map();
    this.calls = new Map();
    this.spoken = null;
    this.li.append(this.said, this.tools, this.answer);
    logged(this.li);
  }

  remove() { this.dropped = true; this.li.remove(); }

  you(text, partial) {
    this.said.textContent = text;
    this.said.classList.toggle("partial", partial);
  }

  toolStarted(callId, name) {
    if (this.calls.has(callId)) return;
    const li = element("li", "tool running");
    li.append(element("code", "name", name), element("span", "result", " …"));
    this.calls.set(callId, li);
    this.tools.append(li);
  }

  toolEnded(callId, name, args, ok, result) {
    this.toolStarted(callId, name);
    const li = this.calls.get(callId);
    li.className = ok ? "tool" : "tool failed";
    li.querySelector(".name").textContent = `${name}(${JSON.stringify(args ?? {})})`;
    li.querySelector(".result").textContent = ` → ${result ?? ""}`;
  }

  piece(seq, text) {
    if (this.final) return;
    this.pieces.set(seq, text);
    const ordered = [...this.pieces.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
    this.answer.textContent = ordered.join(" ");
  }

  reply(text) {
    this.final = true;
    this.answer.textContent = text;
  }

  error(message) { this.li.append(element("p", "error", message)); }

  interrupted() { this.li.append(element("p", "note", "(interrupted)")); }

  timings(rows) {
    if (!rows.length) return;
    const details = element("details", "timings");
    details.append(element("summary", null, "timings"));
    const dl = element("dl");
    for (const [name, value] of rows) dl.append(element("dt", null, name), element("dd", null, value));
    details.append(dl);
    this.li.append(details);
  }
}

// -- announcements ----------------------------------------------------------------------------------
async function hearAnnouncements(mine) {
  while (api === mine) {
    try {
      for await (const entry of mine.announcements()) {
        if (api !== mine) return;
        show(entry.event);
        announcing = announcing.then(() => sayAnnouncement(mine, entry)).catch(() => {});
      }
    } catch (error) {
      if (error instanceof Unauthorized) { if (api === mine) revoked(); return; }
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
  }
}

function show(event) {
  const kind = event.kind ?? "announcement";
  const li = element("li", "announcement");
  li.append(element("span", "kind", `${kind[0].toUpperCase()}${kind.slice(1)}: `),
    element("span", "text", event.text ?? ""));
  logged(li);
  setState(app.dataset.state, `${kind}: ${event.text ?? ""}`);
}

async function sayAnnouncement(mine, entry) {
  while (listening || busy()) await new Promise((resolve) => setTimeout(resolve, 200));
  const { player } = await ensureAudio();
  if (entry.pcm) {
    player.begin();
    player.play(entry.pcm);
  } else if (entry.event.text) {
    const turn = await mine.speak(entry.event.text);
    await follow(turn, null, null);
  }
  await player.idle();
  stats.announcements += 1;
  countSamples();
  count("announcements", stats.announcements);
}

// -- wiring -----------------------------------------------------------------------------------------
$("talk").addEventListener("click", () => { talk(); });
document.addEventListener("keydown", (event) => {
  const typing = event.target.closest?.("input, textarea, select, button, summary, [contenteditable]");
  if (event.code !== "Space" || event.repeat || typing || !api) return;
  event.preventDefault();
  talk();
});
$("ask-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("question").value;
  $("question").value = "";
  ask(text);
});
$("pair-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  $("token").value = "";
  if (!token) return;
  localStorage.setItem(TOKEN_KEY, token);
  pair(token);
});
$("unpair").addEventListener("click", () => {
  localStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(REFUSED_KEY);
  interrupt();
  showPairing("Unpaired. Open a new link, or paste a device token.");
});
// Browsers start audio only after a gesture: the first one anywhere readies it.
for (const kind of ["pointerdown", "keydown"]) {
  document.addEventListener(kind, () => { if (api) ensureAudio().catch(() => {}); }, { once: true });
}

// A pairing link opened in a tab that shows the page already.
window.addEventListener("hashchange", () => {
  const token = tokenFromAddress();
  if (token) { interrupt(); pair(token); }
});

tokenFromAddress();
const saved = localStorage.getItem(TOKEN_KEY);
if (saved) pair(saved);
else showPairing(localStorage.getItem(REFUSED_KEY) ? REVOKED : undefined);
