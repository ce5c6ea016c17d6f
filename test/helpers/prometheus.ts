// A strict reader of the Prometheus text exposition format (version 0.0.4) for tests: every line
// must be a HELP/TYPE comment or a sample `name{label="value",...} number`; anything else throws.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface Exposition {
  types: Map<string, string>;
  samples: Sample[];
  /** The value of the one sample with this name and (at least) these labels; throws when absent. */
  value(name: string, labels?: Record<string, string>): number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const type = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.set(type[1]!, type[2]!);
      continue;
    }
    if (/^# HELP \S+ /.test(line)) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[2]) {
      LABEL.lastIndex = 0;
      while (LABEL.lastIndex < m[2].length) {
        const l = LABEL.exec(m[2]);
        if (!l) throw new Error(`bad labels in: ${line}`);
        labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\(["\\])/g, "$1");
      }
    }
    const value = m[3] === "+Inf" ? Infinity : m[3] === "-Inf" ? -Infinity : Number(m[3]);
    if (Number.isNaN(value) && m[3] !== "NaN") throw new Error(`bad value in: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return {
    types,
    samples,
    value(name, want = {}) {
      const found = samples.filter((s) => s.name === name && Object.entries(want).every(([k, v]) => s.labels[k] === v));
      if (found.length !== 1) throw new Error(`${found.length} samples of ${name} ${JSON.stringify(want)}`);
      return found[0]!.value;
    },
  };
}
