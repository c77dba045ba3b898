// `npm run bench -- heap-diff A.heapsnapshot B.heapsnapshot [--top 30]`: what grew between two heap
// snapshots of the same process (`npm run soak -- --heap-snapshots DIR` writes them after a full
// GC). Objects are grouped by constructor (strings, code and arrays by kind), and the groups whose
// count or size grew most are printed, with the retainers of a few new objects of the top group:
// where a leak is held.
import { readFileSync } from 'node:fs';
import { defineScenario, type Values } from '../lib/scenario.ts';

const OPTIONS = {
  top: { type: 'string', default: '30', help: 'how many groups to list' },
  group: { type: 'string', help: 'the group whose new objects\' retainers are printed (default: the one that grew most)' },
} as const;

// A tool rather than a measure: it records no figures, its JSON holds the options only.
export default defineScenario({
  summary: 'what grew between two heap snapshots (soak --heap-snapshots writes them), by constructor, with retainers',
  positionals: 'A.heapsnapshot B.heapsnapshot',
  options: OPTIONS,
  run: async ({ opt, positionals }) => {
    if (positionals.length !== 2) {
      console.error('usage: npm run bench -- heap-diff A.heapsnapshot B.heapsnapshot [--top N] [--group NAME]');
      return 2;
    }
    diff(positionals[0] as string, positionals[1] as string, opt);
    return 0;
  },
});

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Heap {
  groups: Map<string, { count: number; size: number }>;
  ids: Set<number>;
  raw: Snapshot;
  group: (node: number) => string;
}

function load(file: string): Heap {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const { node_fields: nf, node_types: nt } = raw.snapshot.meta;
  const width = nf.length;
  const [T, N, ID, SIZE] = ['type', 'name', 'id', 'self_size'].map((f) => nf.indexOf(f)) as [number, number, number, number];
  const types = nt[0];
  const group = (i: number) => {
    const type = types[raw.nodes[i + T] as number] as string;
    if (type === 'object' || type === 'closure' || type === 'native') return `${type} ${(raw.strings[raw.nodes[i + N] as number] ?? '').slice(0, 60)}`;
    if (type === 'array' || type === 'hidden') return `${type} ${(raw.strings[raw.nodes[i + N] as number] ?? '').slice(0, 40)}`;
    return type;
  };
  const groups = new Map<string, { count: number; size: number }>();
  const ids = new Set<number>();
  for (let i = 0; i < raw.nodes.length; i += width) {
    const g = group(i);
    const e = groups.get(g) ?? { count: 0, size: 0 };
    e.count++;
    e.size += raw.nodes[i + SIZE] as number;
    groups.set(g, e);
    ids.add(raw.nodes[i + ID] as number);
  }
  return { groups, ids, raw, group };
}

function diff(fileA: string, fileB: string, opt: Values<typeof OPTIONS>): void {
const a = load(fileA);
const b = load(fileB);
const rows = [...b.groups].map(([g, e]) => {
  const before = a.groups.get(g) ?? { count: 0, size: 0 };
  return { g, count: e.count - before.count, size: e.size - before.size, total: e.count };
});
const top = Number(opt.top);
const total = (h: Heap) => [...h.groups.values()].reduce((s, e) => s + e.size, 0);
console.log(`self size: ${(total(a) / 1_048_576).toFixed(2)} MiB -> ${(total(b) / 1_048_576).toFixed(2)} MiB`);
console.log('\ngrew most by size (bytes, count, count in B):');
for (const r of [...rows].sort((x, y) => y.size - x.size).slice(0, top)) console.log(`  ${String(r.size).padStart(10)}  ${String(r.count).padStart(8)}  ${String(r.total).padStart(8)}  ${r.g}`);
console.log('\ngrew most by count:');
for (const r of [...rows].sort((x, y) => y.count - x.count).slice(0, top)) console.log(`  ${String(r.count).padStart(8)}  ${String(r.size).padStart(10)}  ${r.g}`);

// Retainers of new objects of one group (the largest growth unless --group names one).
const target = opt.group ?? [...rows].sort((x, y) => y.size - x.size)[0]?.g;
const { node_fields: nf, edge_fields: ef, edge_types: et } = b.raw.snapshot.meta;
const width = nf.length;
const ew = ef.length;
const [ECOUNT, ID] = [nf.indexOf('edge_count'), nf.indexOf('id')];
const [ET, EN, ETO] = [ef.indexOf('type'), ef.indexOf('name_or_index'), ef.indexOf('to_node')];
const retainers = new Map<number, { from: number; edge: string }[]>();
for (let i = 0, e = 0; i < b.raw.nodes.length; i += width) {
  const n = b.raw.nodes[i + ECOUNT] as number;
  for (let k = 0; k < n; k++, e += ew) {
    const to = b.raw.edges[e + ETO] as number;
    const type = et[0][b.raw.edges[e + ET] as number] as string;
    if (type === 'weak') continue;
    const name = type === 'element' || type === 'hidden' ? `[${b.raw.edges[e + EN]}]` : String(b.raw.strings[b.raw.edges[e + EN] as number]);
    const list = retainers.get(to) ?? [];
    if (list.length < 4) list.push({ from: i, edge: name });
    retainers.set(to, list);
  }
}
const fresh: number[] = [];
for (let i = 0; i < b.raw.nodes.length && fresh.length < 5; i += width) if (b.group(i) === target && !a.ids.has(b.raw.nodes[i + ID] as number)) fresh.push(i);
console.log(`\nretainer chains of ${fresh.length} new objects of "${target}":`);
for (const start of fresh) {
  const chain: string[] = [];
  let at = start;
  const seen = new Set<number>();
  // Runs of the same kind (a promise's list of reactions, a linked list) are folded into one line.
  let repeats = 0;
  for (let steps = 0; chain.length < 14 && steps < 1_000_000; steps++) {
    const r = retainers.get(at)?.find((x) => !seen.has(x.from));
    if (!r) break;
    seen.add(r.from);
    const line = `${r.edge} <- ${b.group(r.from)}`;
    if (b.group(r.from) === b.group(at) && chain.length > 0) repeats++;
    else {
      if (repeats) chain.push(`(x${repeats} more of the same)`);
      repeats = 0;
      chain.push(line);
    }
    at = r.from;
  }
  if (repeats) chain.push(`(x${repeats} more of the same)`);
  console.log(`  ${b.group(start)}\n    ${chain.join('\n    ')}`);
}
}
