// The microphone, open only while a command is spoken (the browser shows it is listening, and
// nothing is captured in between): getUserMedia into the capture worklet, frames of 16 kHz PCM
// to `onFrame`. The browser's own processing is off (noise suppression, gain control, echo
// cancellation): speech to text gets the voice as it was captured. The page never listens
// while it plays a reply (Talk stops the reply first), so there is no echo to cancel.

export class Microphone {
  constructor(context) {
    this.context = context;
    this.onFrame = () => {};
    this.loaded = null;
    this.open_ = null;  // {stream, source, node} while open
  }

  /** Open the microphone (asks for permission the first time). */
  async open() {
    if (this.open_) return;
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new Error("this browser gives the microphone only to pages on HTTPS or localhost");
    }
    this.loaded ??= this.context.audioWorklet.addModule(
      new URL("capture-worklet.js", import.meta.url));
    await this.loaded;
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: {
        channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false,
      },
    });
    const source = this.context.createMediaStreamSource(stream);
    const node = new AudioWorkletNode(this.context, "voxqueue-capture", { numberOfOutputs: 0 });
    node.port.onmessage = (message) => this.onFrame(new Int16Array(message.data));
    source.connect(node);
    this.open_ = { stream, source, node };
  }

  /** Let the microphone go. */
  close() {
    if (!this.open_) return;
    const { stream, source, node } = this.open_;
    this.open_ = null;
    node.port.onmessage = null;
    source.disconnect();
    for (const track of stream.getTracks()) track.stop();
  }
}
