// A server-sent events parser for streams read with fetch (EventSource cannot send the bearer
// token). Feed it text as it arrives; it returns the complete events seen so far.

export class SSEParser {
  constructor() {
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.data = [];
    this.event = "";
    this.id = null;
  }

  /** @returns {{id: string|null, event: string, data: string}[]} */
  feed(text) {
    this.buffer += text;
    const out = [];
    let at;
    while ((at = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      if (at === this.buffer.length - 1 && this.buffer[at] === "\r") break; // "\n" may follow
      const line = this.buffer.slice(0, at);
      const breakLength = this.buffer.startsWith("\r\n", at) ? 2 : 1;
      this.buffer = this.buffer.slice(at + breakLength);
      if (line === "") {
        if (this.data.length) out.push({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
        this.reset();
        continue;
      }
      if (line.startsWith(":")) continue; // a comment (keep-alive ping)
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
      else if (field === "id") this.id = value;
    }
    return out;
  }
}
