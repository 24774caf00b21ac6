// The reply's audio, played as it streams: each chunk (16 kHz mono 16-bit PCM) scheduled right
// after the one before, on Web Audio; `stop` silences it at once (barge-in). Counters for the
// page (and its tests): samples scheduled and played, and when the first one is heard.

const RATE = 16000;
const LEAD_S = 0.05;  // a first chunk starts this far ahead: no click, no gap

export class Player {
  constructor(context) {
    this.context = context;
    this.sources = new Set();
    this.nextAt = 0;
    this.odd = null;  // a byte left over from a chunk of odd length
    this.scheduled = 0;
    this.played = 0;
    this.onFirstSound = () => {};
    this.waiting = [];  // resolvers of idle()
    this.fresh = true;  // the next chunk is the first of a reply
  }

  get playing() { return this.sources.size > 0; }

  /** Start a new reply: its first chunk reports when it is heard. */
  begin() { this.fresh = true; this.odd = null; }

  /** Play little-endian 16-bit PCM bytes after what is already scheduled. */
  play(bytes) {
    if (this.odd !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.odd;
      joined.set(bytes, 1);
      bytes = joined;
      this.odd = null;
    }
    if (bytes.length % 2) {
      this.odd = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    const n = bytes.length / 2;
    if (!n) return;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const buffer = this.context.createBuffer(1, n, RATE);
    const samples = buffer.getChannelData(0);
    for (let i = 0; i < n; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const now = this.context.currentTime;
    const at = Math.max(now + (this.playing ? 0 : LEAD_S), this.nextAt);
    source.start(at);
    this.nextAt = at + buffer.duration;
    this.sources.add(source);
    this.scheduled += n;
    if (this.fresh) {
      this.fresh = false;
      const latency = this.context.outputLatency || this.context.baseLatency || 0;
      this.onFirstSound(performance.now() + (at - now + latency) * 1000);
    }
    source.onended = () => {
      if (!this.sources.delete(source)) return;  // stopped: not heard
      this.played += n;
      this.settle();
    };
  }

  /** Silence everything scheduled (barge-in, a cancelled turn). */
  stop() {
    const stopped = [...this.sources];
    this.sources.clear();
    for (const source of stopped) source.stop();
    this.nextAt = 0;
    this.odd = null;
    this.settle();
  }

  settle() {
    if (this.playing) return;
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  /** Resolves once everything scheduled has been played (or stopped). */
  idle() {
    if (!this.playing) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}
