// The reply's audio in speaking order: a port of voxqueue/client/result.py in_speaking_order.
// Sentences synthesized in parallel play one after another (by seq); a sentence synthesized
// again (a newer attempt) replaces the older rendition and is heard whole, never spliced.

/** Bytes that grow at the end (a Python bytearray, as far as this module needs one). */
class Bytes {
  constructor() { this.buf = new Uint8Array(0); this.length = 0; }

  append(data) {
    if (this.length + data.length > this.buf.length) {
      const grown = new Uint8Array(Math.max(this.length + data.length, this.buf.length * 2, 1024));
      grown.set(this.buf.subarray(0, this.length));
      this.buf = grown;
    }
    this.buf.set(data, this.length);
    this.length += data.length;
  }

  slice(start, end = this.length) { return this.buf.slice(start, Math.min(end, this.length)); }
}

function same(a, b, n) {
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

const EMPTY = new Uint8Array(0);

/** One sentence's audio: the newest rendition's bytes (its task's newest attempt). */
class Sentence {
  constructor() {
    this.attempt = 0;
    this.audio = new Bytes();
    this.played = 0;  // bytes of audio handed to the listener
    this.heard = EMPTY;  // what was heard of an older rendition, while the newer is checked
  }

  /** Add a chunk; a newer attempt replaces the audio, an older one is dropped. */
  take(attempt, offset, pcm) {
    if (attempt < this.attempt) return;  // a superseded attempt's chunk: never heard
    if (attempt > this.attempt) {
      if (this.played) this.heard = this.audio.slice(0, this.played);
      this.attempt = attempt;
      this.audio = new Bytes();
      this.played = 0;
    }
    const have = this.audio.length;
    const start = offset === null ? have : offset;
    if (start + pcm.length > have) this.audio.append(pcm.subarray(Math.max(0, have - start)));
  }

  /** The audio the listener may hear now. */
  playable(ended) {
    if (this.heard.length) {
      const n = Math.min(this.audio.length, this.heard.length);
      if (!same(this.audio.buf, this.heard, n)) {
        this.heard = EMPTY;  // another rendition: heard again from its start
      } else if (this.audio.length >= this.heard.length || ended) {
        this.played = n;  // the same audio again: on from there
        this.heard = EMPTY;
      } else {
        return EMPTY;  // not known yet which
      }
    }
    const fresh = this.audio.slice(this.played);
    this.played = this.audio.length;
    return fresh;
  }
}

/**
 * Fed a turn's entries one by one ({event: {type, data}, pcm: Uint8Array|null}), it answers
 * the PCM that can be played now, in order. A later sentence's chunks wait until every
 * earlier sentence has ended (tts-end, or the turn's run-end).
 */
export class SpeakingOrder {
  constructor() {
    this.nextSeq = 0;
    this.sentences = new Map();
    this.ended = new Set();
  }

  /** The PCM chunks (Uint8Array) this entry makes playable, in order. */
  push(entry) {
    const { type, data = {} } = entry.event;
    if (type === "tts-chunk" && entry.pcm) {
      const seq = Number(data.seq ?? 0);
      const attempt = Number(data.attempt ?? 1);
      const offset = data.offset === undefined || data.offset === null ? null : Number(data.offset);
      if (!this.sentences.has(seq)) this.sentences.set(seq, new Sentence());
      this.sentences.get(seq).take(attempt, offset, entry.pcm);
    } else if (type === "tts-end") {
      this.ended.add(Number(data.seq ?? 0));
    } else if (type === "run-end") {
      for (const seq of this.sentences.keys()) this.ended.add(seq);
      const last = Math.max(this.nextSeq, ...this.sentences.keys());
      for (let seq = this.nextSeq; seq <= last; seq++) this.ended.add(seq);
    } else {
      return [];
    }
    return this.drain();
  }

  drain() {
    const out = [];
    for (;;) {
      const sentence = this.sentences.get(this.nextSeq);
      if (sentence) {
        const pcm = sentence.playable(this.ended.has(this.nextSeq));
        if (pcm.length) out.push(pcm);
      }
      if (!this.ended.has(this.nextSeq)) return out;
      this.sentences.delete(this.nextSeq);
      this.nextSeq += 1;
    }
  }
}

/** Every playable chunk of these entries, in speaking order (as the Python generator). */
export function inSpeakingOrder(entries) {
  const order = new SpeakingOrder();
  return entries.flatMap((entry) => order.push(entry));
}
