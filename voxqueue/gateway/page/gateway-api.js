// The gateway's API as the page uses it (docs/gateway.md): the device token in the
// Authorization header, or, on the WebSocket (where a browser cannot set headers), as a
// second subprotocol next to "voxqueue.v1". Never in a URL.

const WAIT_MS = 8000;

/** The gateway refused the token (401): revoked, or wrong. */
export class Unauthorized extends Error {}

/** Any other refusal, with the gateway's code. */
export class Refused extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function bytesOf(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

export class Gateway {
  constructor(token, origin = location.origin) {
    this.token = token;
    this.origin = origin;
  }

  async call(method, path, { body, params, signal } = {}) {
    const url = new URL(path, this.origin);
    for (const [key, value] of Object.entries(params ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
    }
    const headers = { Authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const answer = await fetch(url, {
      method, headers, signal, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await answer.json().catch(() => ({}));
    if (answer.status === 401) throw new Unauthorized(json.message ?? "unknown or revoked token");
    if (!answer.ok) {
      throw new Refused(answer.status, json.code ?? "error", json.message ?? answer.statusText);
    }
    return json;
  }

  /** The device this token belongs to: {device}. */
  whoami() { return this.call("GET", "/v1/device"); }

  /** A turn from typed text: {turn_id, session_id, deadline}. */
  ask(text, session) { return this.call("POST", "/v1/turns", { body: { text, session } }); }

  /** Text said as it is on this device (an announcement read aloud). */
  speak(text) { return this.call("POST", "/v1/speak", { body: { text } }); }

  cancel(turnId) { return this.call("POST", `/v1/turns/${encodeURIComponent(turnId)}/cancel`); }

  /** One long poll of a stream: {entries, last_id}, each entry's PCM as bytes. Busy (429:
   *  the device's long polls are all open, e.g. one just abandoned on barge-in and not yet
   *  closed by the server) or unavailable (503): asked again a second later. */
  async poll(path, after, signal) {
    for (;;) {
      try {
        const got = await this.call("GET", path, { params: { after, wait_ms: WAIT_MS }, signal });
        for (const entry of got.entries) entry.pcm = entry.pcm ? bytesOf(entry.pcm) : null;
        return got;
      } catch (error) {
        if (!(error instanceof Refused && (error.status === 429 || error.status === 503))) {
          throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
        signal?.throwIfAborted();
      }
    }
  }

  /** A turn's entries as they come, up to its run-end. */
  async *events(turnId, signal) {
    let after = "0";
    for (;;) {
      const got = await this.poll(`/v1/turns/${encodeURIComponent(turnId)}/events`, after, signal);
      after = got.last_id;
      for (const entry of got.entries) {
        yield entry;
        if (entry.event.type === "run-end") return;
      }
    }
  }

  /** This device's announcements (timers, reminders, alerts) from now on, for ever. */
  async *announcements(signal) {
    let after = null;
    for (;;) {
      const got = await this.poll("/v1/announcements", after, signal);
      after = got.last_id;
      yield* got.entries;
    }
  }

  /** A command streamed while it is spoken: see {@link Stream}. */
  stream(session) {
    const url = new URL("/v1/turns/stream", this.origin);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("rate", "16000");
    if (session) url.searchParams.set("session", session);
    return new Stream(new WebSocket(url, ["voxqueue.v1", `voxqueue.token.${this.token}`]));
  }
}

/**
 * Frames of 16 kHz PCM to the gateway as they are captured; `turn` resolves with the turn
 * the gateway started at the first frame ({turn_id, session_id, deadline}).
 */
export class Stream {
  constructor(socket) {
    this.socket = socket;
    this.socket.binaryType = "arraybuffer";
    this.queue = [];  // what was sent before the socket opened
    this.sentFrames = 0;
    this.error = null;  // the gateway's refusal, if it refused the stream
    this.turn = new Promise((resolve, reject) => {
      socket.onopen = () => { for (const item of this.queue.splice(0)) socket.send(item); };
      socket.onmessage = (message) => {
        const said = JSON.parse(message.data);
        if (said.type === "turn") resolve(said);
        else if (said.type === "error") {
          this.error = new Refused(0, said.code, said.message);
          reject(this.error);
        }
      };
      socket.onclose = (close) => reject(close.code === 1006 && !this.opened
        ? new Unauthorized("the gateway refused the stream") : new Error("the stream closed"));
    });
    socket.addEventListener("open", () => { this.opened = true; });
    this.turn.catch(() => {});  // who needs it awaits it
  }

  send(item) {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(item);
    else if (this.socket.readyState === WebSocket.CONNECTING) this.queue.push(item);
  }

  /** One frame (an Int16Array). */
  write(frame) {
    this.sentFrames += 1;
    this.send(frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.byteLength));
  }

  /** The command is over; `spokenUntil`: audio time of its last voiced frame. */
  end(spokenUntil) { this.send(JSON.stringify({ type: "end", spoken_until: spokenUntil })); }

  /** Drop the command (nothing was said). */
  cancel() {
    this.send(JSON.stringify({ type: "cancel" }));
  }
}
