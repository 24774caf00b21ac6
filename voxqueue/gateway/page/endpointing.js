// When a spoken command starts and ends: an energy detector of voice with an adaptive noise
// floor, and the edge's end-of-turn decisions (edge/vad.py Endpointer, edge/device.py): a
// trailing silence ends the command; once the server's partial transcript says the words make
// a complete command, a short pause ends it; when they stop mid-sentence ("set a timer for"),
// a longer one; no speech at all within `noSpeechS` drops it.

export const FRAME_S = 0.02;

/** The edge's defaults (edge/settings.py). */
export const SETTINGS = Object.freeze({
  trailingSilenceS: 0.7,  // "default" silence
  speechStartS: 0.3,
  resetS: 0.3,
  blipS: 0.1,
  noSpeechS: 4.0,
  maxSeconds: 15.0,
  endEarlyS: 0.25,
  unfinishedWaitS: 1.2,
  followUpS: 4.0,
});

/** Voice or not, by the frame's energy over a noise floor that follows the room. */
export class EnergyVad {
  constructor({ marginDb = 12, minDb = -50 } = {}) {
    this.marginDb = marginDb;  // speech is this far above the floor
    this.minDb = minDb;  // and at least this loud (dB full scale)
    this.floorDb = null;
  }

  static levelDb(frame) {
    let sum = 0;
    for (let i = 0; i < frame.length; i++) sum += frame[i] * frame[i];
    const rms = Math.sqrt(sum / Math.max(1, frame.length)) / 32768;
    return 20 * Math.log10(rms + 1e-9);
  }

  isSpeech(frame) {
    const db = EnergyVad.levelDb(frame);
    if (this.floorDb === null) this.floorDb = db;
    const speech = db > this.floorDb + this.marginDb && db > this.minDb;
    // The floor falls fast to quieter frames and rises slowly: in seconds to a louder room,
    // hardly at all while someone speaks.
    const rise = speech ? 0.002 : 0.03;
    this.floorDb += (db - this.floorDb) * (db < this.floorDb ? 0.3 : rise);
    return speech;
  }
}

/**
 * One command being spoken, frame by frame: `feed(frame)` answers null while it goes on, or
 * why it is over: "ended" (trailing silence), "understood" (the server heard a complete
 * command and the speaker paused), "too-long", or "no-speech" (drop it).
 */
export class Command {
  constructor(settings = SETTINGS, { noSpeechS = settings.noSpeechS } = {}) {
    this.s = settings;
    this.vad = new EnergyVad();
    this.noSpeechS = noSpeechS;
    this.started = false;
    this.frames = 0;
    this.speechS = 0;  // before the start: speech in bursts
    this.silenceS = 0;
    this.talkS = 0;
    this.trailingS = settings.trailingSilenceS;
    this.completeUntil = null;  // audio time the server understood as a complete command
    this.unfinishedUntil = null;  // audio time the words so far stopped mid-sentence
    this.lastVoiceAt = null;  // performance.now() of the last voiced frame
  }

  get elapsedS() { return this.frames * FRAME_S; }

  /** Audio time (s from the command's start) of its last voiced frame. */
  get spokenUntil() { return this.elapsedS - (this.started ? this.silenceS : 0); }

  /** The server's latest partial transcript (an `stt-partial` event's data). */
  partial(data) {
    const at = Number(data.at_s ?? 0);
    this.completeUntil = data.complete ? at : null;
    this.unfinishedUntil = data.unfinished ? at : null;
  }

  feed(frame) {
    this.frames += 1;
    const speech = this.vad.isSpeech(frame);
    if (speech) this.lastVoiceAt = performance.now();
    if (!this.started) {
      if (speech) {
        this.silenceS = 0;
        this.speechS += FRAME_S;
        if (this.speechS >= this.s.speechStartS - 1e-9) {
          this.started = true;
          this.silenceS = this.talkS = 0;
        }
      } else {
        this.silenceS += FRAME_S;
        if (this.silenceS >= this.s.resetS) this.speechS = 0;
      }
      return !this.started && this.elapsedS >= this.noSpeechS ? "no-speech" : null;
    }
    if (speech) {
      this.talkS += FRAME_S;
      if (this.talkS >= this.s.blipS - 1e-9) this.silenceS = 0;
    } else {
      this.talkS = 0;
      this.silenceS += FRAME_S;
    }
    if (this.elapsedS >= this.s.maxSeconds) return "too-long";
    const until = this.spokenUntil;
    if (this.completeUntil !== null && this.s.endEarlyS > 0 && this.silenceS >= this.s.endEarlyS
        && until <= this.completeUntil + 0.1) return "understood";
    const hanging = this.unfinishedUntil !== null && until <= this.unfinishedUntil + 0.1;
    this.trailingS = Math.max(this.s.trailingSilenceS, hanging ? this.s.unfinishedWaitS : 0);
    return this.silenceS >= this.trailingS - 1e-9 ? "ended" : null;
  }
}

/** Whether to listen again without a press after a spoken turn (the edge's follow-up): its
 *  reply asked a question, it was heard to the end, and it ended well. */
export function listensAgain(outcome, settings = SETTINGS) {
  return Boolean(outcome) && outcome.status === "ok" && !outcome.interrupted
    && settings.followUpS > 0 && (outcome.reply ?? "").trim().endsWith("?");
}
