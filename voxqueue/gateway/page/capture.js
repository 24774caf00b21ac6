// The microphone, opened once on the first press of Talk and kept for the page's life:
// getUserMedia into the capture worklet, frames of 16 kHz PCM to `onFrame`.

export class Microphone {
  constructor(context) {
    this.context = context;
    this.onFrame = () => {};
    this.node = null;
  }

  /** Open the microphone (asks for permission the first time). */
  async open() {
    if (this.node) return;
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new Error("This browser gives the microphone only to pages on HTTPS or localhost.");
    }
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    await this.context.audioWorklet.addModule(new URL("capture-worklet.js", import.meta.url));
    const source = this.context.createMediaStreamSource(stream);
    this.node = new AudioWorkletNode(this.context, "voxqueue-capture", { numberOfOutputs: 0 });
    this.node.port.onmessage = (message) => this.onFrame(new Int16Array(message.data));
    source.connect(this.node);
    this.stream = stream;
  }
}
