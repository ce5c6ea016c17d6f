// A growable list of 32-bit integers in one typed array. A number[] of millions (an instruction
// scan of a 4 MiB function body) cost the collector pauses of a quarter of a second on the thread;
// a typed array is one object it does not look into.
export class IntList {
  private buf = new Int32Array(64);
  length = 0;

  push(value: number): void {
    if (this.length === this.buf.length) {
      const grown = new Int32Array(this.buf.length * 2);
      grown.set(this.buf);
      this.buf = grown;
    }
    this.buf[this.length++] = value;
  }

  pop(): number {
    return this.buf[--this.length]!;
  }

  get(index: number): number {
    return this.buf[index]!;
  }

  set(index: number, value: number): void {
    this.buf[index] = value;
  }

  last(): number {
    return this.buf[this.length - 1]!;
  }
}
