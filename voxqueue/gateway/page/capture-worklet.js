// The microphone in 20 ms frames of 16 kHz mono 16-bit PCM, posted to the page as
// ArrayBuffers. Runs on the audio thread (an AudioWorklet): the context's own rate (often
// 48 kHz) is brought down by averaging the input samples each output sample stands for (a box
// filter, enough against aliasing for speech), or by linear interpolation below 16 kHz.

const RATE = 16000;
const FRAME = 320;  // 20 ms at 16 kHz

class Capture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / RATE;  // input samples per output sample
    this.pos = 0;  // where the next output sample falls, in input samples from `carry`'s start
    this.carry = new Float32Array(0);  // input not used up yet
    this.frame = new Int16Array(FRAME);
    this.filled = 0;
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true;
    const n = channels[0].length;
    const input = new Float32Array(this.carry.length + n);
    input.set(this.carry);
    for (let i = 0; i < n; i++) {  // down to mono
      let sum = 0;
      for (const channel of channels) sum += channel[i];
      input[this.carry.length + i] = sum / channels.length;
    }
    let pos = this.pos;
    while (pos + Math.max(this.step, 1) <= input.length) {
      let value;
      if (this.step >= 1) {
        const from = Math.floor(pos);
        const to = Math.max(from + 1, Math.floor(pos + this.step));
        let sum = 0;
        for (let i = from; i < to; i++) sum += input[i];
        value = sum / (to - from);
      } else {
        const i = Math.floor(pos);
        const t = pos - i;
        value = input[i] * (1 - t) + input[Math.min(i + 1, input.length - 1)] * t;
      }
      this.frame[this.filled++] = Math.max(-32768, Math.min(32767, Math.round(value * 32767)));
      if (this.filled === FRAME) {
        const out = this.frame.slice().buffer;
        this.port.postMessage(out, [out]);
        this.filled = 0;
      }
      pos += this.step;
    }
    const used = Math.floor(pos);
    this.carry = input.slice(used);
    this.pos = pos - used;
    return true;
  }
}

registerProcessor("voxqueue-capture", Capture);
