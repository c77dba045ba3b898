// The figures of a run as JSON (bench/results/<scenario>-<date>-<sha>.json): the machine, the
// commit, the options, and rows of figures, each with its median and its value in every round.
// Scenarios call `record` as they measure; the runner writes the file at the end. `compare` sets
// two such files side by side, `renderMarkdown` makes the README's tables from them.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** One figure of a row: its unit, which way is better, and its value in each round (one round: one value). */
export interface Figure {
  unit: string;
  better?: 'higher' | 'lower';
  median: number;
  rounds: number[];
}

/** One row: a target or case in one section of a scenario (e.g. "table, 32 connections" / "gateway, X-API-Key"). */
export interface ResultRow {
  section: string;
  label: string;
  figures: Record<string, Figure>;
}

export interface ResultFile {
  scenario: string;
  date: string;
  git: { sha: string; dirty: boolean };
  machine: { cpus: number; model: string; memGiB: number; os: string; node: string; loadavg: number[] };
  command: string;
  options: Record<string, unknown>;
  exitCode: number;
  rows: ResultRow[];
}

export const median = (xs: number[]): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((x, y) => x - y);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

/** A figure as `record` takes it: a single value, or the values of the rounds. */
export type FigureInput = number | number[] | { unit: string; better?: 'higher' | 'lower'; value: number | number[] };

const rows: ResultRow[] = [];

/**
 * Adds figures to the row `section` / `label` (made on first use). A figure given as a bare
 * number gets its unit from its name's tail (`_ms`, `_us`, `rps`, ...), see `unitOf`.
 */
export function record(section: string, label: string, figures: Record<string, FigureInput | null | undefined>): void {
  let row = rows.find((r) => r.section === section && r.label === label);
  if (!row) {
    row = { section, label, figures: {} };
    rows.push(row);
  }
  for (const [name, f] of Object.entries(figures)) {
    if (f === null || f === undefined) continue;
    const spec = typeof f === 'object' && !Array.isArray(f) ? f : { ...unitOf(name), value: f };
    const values = (Array.isArray(spec.value) ? spec.value : [spec.value]).filter((v) => Number.isFinite(v));
    if (values.length === 0) continue;
    row.figures[name] = { unit: spec.unit, ...(spec.better ? { better: spec.better } : {}), median: median(values), rounds: values };
  }
}

/** The unit and direction a figure's name implies: rps and .../s are higher-better, times and CPU lower-better. */
export function unitOf(name: string): { unit: string; better?: 'higher' | 'lower' } {
  if (name === 'rps' || name.endsWith('_per_s')) return { unit: name === 'rps' ? 'req/s' : '/s', better: 'higher' };
  if (name.endsWith('_ms')) return { unit: 'ms', better: 'lower' };
  if (name.endsWith('_us')) return { unit: 'µs', better: 'lower' };
  if (name.endsWith('_ns')) return { unit: 'ns', better: 'lower' };
  if (name.endsWith('_mib')) return { unit: 'MiB', better: 'lower' };
  if (name.endsWith('_pct')) return { unit: '%', better: 'lower' };
  if (name.endsWith('_ratio')) return { unit: 'x' };
  return { unit: '' };
}

/** The rows recorded so far (the runner writes them; a test may read them). */
export const recorded = (): ResultRow[] => rows;

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

export function machine(): ResultFile['machine'] {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    model: cpus[0]?.model.trim() ?? 'unknown CPU',
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.platform()} ${os.release()}`,
    node: process.version,
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

/** Writes this run's file; `file` defaults to bench/results/<scenario>-<date>-<short sha>.json under `root`. Returns its path. */
export function writeResults(root: string, scenario: string, options: Record<string, unknown>, exitCode: number, file?: string): string {
  const sha = git(['rev-parse', 'HEAD']) || 'unknown';
  const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
  const now = new Date();
  const stamp = now.toISOString().slice(0, 19).replace('T', '-').replaceAll(':', '');
  const out = file ? path.resolve(file) : path.join(root, 'bench', 'results', `${scenario}-${stamp}-${sha.slice(0, 7)}.json`);
  const result: ResultFile = {
    scenario,
    date: now.toISOString(),
    git: { sha, dirty },
    machine: machine(),
    command: `npm run bench -- ${process.argv.slice(2).map((a) => (/^[\w./:=,-]+$/.test(a) ? a : `'${a}'`)).join(' ')}`.trim(),
    options,
    exitCode,
    rows,
  };
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 1)}\n`);
  return out;
}

const fmt = (n: number): string => {
  if (Number.isInteger(n)) return String(n);
  const a = Math.abs(n);
  return a >= 100 ? n.toFixed(0) : a >= 10 ? n.toFixed(1) : a >= 1 ? n.toFixed(2) : n.toFixed(3);
};
/** The spread of a figure's rounds: (highest - lowest) / median, as a percentage; undefined with one round. */
export const spread = (f: Figure): number | undefined => (f.rounds.length > 1 && f.median !== 0 ? ((Math.max(...f.rounds) - Math.min(...f.rounds)) / Math.abs(f.median)) * 100 : undefined);
const spreadText = (f: Figure) => {
  const s = spread(f);
  return s === undefined ? '1 round' : `±${(s / 2).toFixed(0)}% (${f.rounds.length} rounds)`;
};

/**
 * The rows of `b` against those of `a` (same section and label): per figure both medians, the
 * ratio b/a and each side's spread over its rounds; a ratio inside the spreads says nothing.
 */
export function compare(a: ResultFile, b: ResultFile): string[] {
  const lines = [
    `a: ${a.scenario} ${a.date} ${a.git.sha.slice(0, 7)}${a.git.dirty ? '+dirty' : ''} (${a.command})`,
    `b: ${b.scenario} ${b.date} ${b.git.sha.slice(0, 7)}${b.git.dirty ? '+dirty' : ''} (${b.command})`,
  ];
  if (a.scenario !== b.scenario) lines.push(`note: different scenarios (${a.scenario}, ${b.scenario}); only rows with the same section and label are compared`);
  const head = ['row', 'figure', 'a median', 'b median', 'b/a', 'a spread', 'b spread', ''];
  const body: string[][] = [];
  for (const rb of b.rows) {
    const ra = a.rows.find((r) => r.section === rb.section && r.label === rb.label);
    if (!ra) continue;
    for (const [name, fb] of Object.entries(rb.figures)) {
      const fa = ra.figures[name];
      if (!fa) continue;
      const ratio = fb.median / fa.median;
      const noise = Math.max(spread(fa) ?? 0, spread(fb) ?? 0) / 2 / 100;
      const verdict =
        !Number.isFinite(ratio) || !fb.better ? '' : Math.abs(ratio - 1) <= noise ? 'within spread' : (ratio > 1) === (fb.better === 'higher') ? 'better' : 'worse';
      body.push([`${rb.section} / ${rb.label}`, `${name} (${fb.unit})`, fmt(fa.median), fmt(fb.median), Number.isFinite(ratio) ? `${ratio.toFixed(3)}x` : '-', spreadText(fa), spreadText(fb), verdict]);
    }
  }
  const missing = [...a.rows.filter((r) => !b.rows.some((x) => x.section === r.section && x.label === r.label)).map((r) => `only in a: ${r.section} / ${r.label}`), ...b.rows.filter((r) => !a.rows.some((x) => x.section === r.section && x.label === r.label)).map((r) => `only in b: ${r.section} / ${r.label}`)];
  if (body.length === 0) return [...lines, 'no row in common', ...missing];
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ').trimEnd();
  return [...lines, '', line(head), line(widths.map((w) => '-'.repeat(w))), ...body.map(line), ...(missing.length ? ['', ...missing] : [])];
}

/** A result file as Markdown: a line saying where and when, then one table per section (medians, [lowest-highest] with more than one round). */
export function renderMarkdown(r: ResultFile, file: string): string {
  const m = r.machine;
  const out = [
    `\`${r.command}\` at ${r.git.sha.slice(0, 7)}${r.git.dirty ? ' (uncommitted changes)' : ''}, ${r.date.slice(0, 10)}; ` +
      `${m.cpus} cores (${m.model}), ${m.memGiB} GiB, node ${m.node}, load average ${m.loadavg.join(' ')} at the end; exit ${r.exitCode}; ` +
      `[${path.basename(file)}](results/${path.basename(file)})`,
  ];
  const sections = [...new Set(r.rows.map((x) => x.section))];
  for (const section of sections) {
    const rs = r.rows.filter((x) => x.section === section);
    const names = [...new Set(rs.flatMap((x) => Object.keys(x.figures)))];
    const unit = (n: string) => rs.map((x) => x.figures[n]?.unit).find((u) => u) ?? '';
    out.push('', `**${section}**`, '', `| | ${names.map((n) => `${n}${unit(n) ? ` (${unit(n)})` : ''}`).join(' | ')} |`, `|---|${names.map(() => '---:').join('|')}|`);
    for (const x of rs) {
      const cells = names.map((n) => {
        const f = x.figures[n];
        if (!f) return '';
        return f.rounds.length > 1 ? `${fmt(f.median)} [${fmt(Math.min(...f.rounds))}-${fmt(Math.max(...f.rounds))}]` : fmt(f.median);
      });
      out.push(`| ${x.label.replace(/\|/g, '\\|')} | ${cells.join(' | ')} |`);
    }
  }
  if (sections.length === 0) out.push('', 'no figures recorded');
  return out.join('\n');
}
