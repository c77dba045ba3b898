// The repository must explain itself: every contract id (C1 to C60, C46a) and every id the code or
// the docs cite has its section in docs/decisions.md, a section's reasons are its own entry of
// docs/choices.md, the README is a short front door whose table of contents reaches every file of
// docs/, the README and docs/ only link to files and headings that exist, and neither they nor the
// code and its tests cite an issue tracker the repository does not hold.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

const root = path.resolve(import.meta.dirname, '../..');
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8');

const CONTRACT_ID = /\bC(\d{1,3})\b/g;

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else out.push(full);
  }
  return out;
}

/** Each contract id cited in `text`, with the line it is on. */
function citedIds(text: string): { id: number; line: number }[] {
  const out: { id: number; line: number }[] = [];
  text.split('\n').forEach((l, i) => {
    for (const m of l.matchAll(CONTRACT_ID)) out.push({ id: Number(m[1]), line: i + 1 });
  });
  return out;
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens, links as their text. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]*>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a Markdown file offers: explicit `id="..."` and its headings' slugs. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const m of markdown.matchAll(/\bid="([^"]+)"/g)) anchors.add(m[1] as string);
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const h = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!h) continue;
    const base = slug(h[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Link targets of a Markdown file, outside code blocks and code spans: `[text](target)` and `[ref]: target`. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  const targets: string[] = [];
  for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(m[1] as string);
  for (const m of prose.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) targets.push(m[1] as string);
  return targets;
}

/** What is wrong with the relative links of the Markdown file `rel` (repository-relative). */
function brokenLinks(rel: string): string[] {
  const text = read(rel);
  const problems: string[] = [];
  for (const target of linkTargets(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
    const [file = '', fragment] = target.split('#', 2);
    const resolved = file === '' ? path.join(root, rel) : path.resolve(path.dirname(path.join(root, rel)), decodeURI(file));
    if (path.relative(root, resolved).startsWith('..')) {
      problems.push(`${target}: outside the repository`);
      continue;
    }
    if (!existsSync(resolved)) {
      problems.push(`${target}: no such file or folder`);
      continue;
    }
    if (fragment && resolved.endsWith('.md') && !anchorsOf(readFileSync(resolved, 'utf8')).has(fragment)) {
      problems.push(`${target}: no anchor #${fragment} in ${path.relative(root, resolved)}`);
    }
  }
  return problems;
}

const decisions = read('docs/decisions.md');

/** Every Markdown file of docs/, repository-relative. */
const docFiles = readdirSync(path.join(root, 'docs'))
  .filter((n) => n.endsWith('.md'))
  .sort()
  .map((n) => `docs/${n}`);
/** The topic files moved out of the README: they cite contract ids as links, as the README does. */
const GENERATED_OR_OWN_STYLE = new Set(['docs/decisions.md', 'docs/config-reference.md', 'docs/deploy.md', 'docs/architecture.md']);
const topicFiles = docFiles.filter((f) => !GENERATED_OR_OWN_STYLE.has(f));

/** Ids with both an anchor `<a id="cN">` and a heading `### CN.` in docs/decisions.md. */
function documentedIds(): Set<number> {
  const anchors = anchorsOf(decisions);
  const ids = new Set<number>();
  for (const m of decisions.matchAll(/^#{2,4}\s+C(\d+)\./gm)) {
    if (anchors.has(`c${m[1]}`)) ids.add(Number(m[1]));
  }
  return ids;
}

describe('docs/decisions.md', () => {
  test('every contract id from C1 to C60, and C46a, has a section with its anchor', () => {
    const documented = documentedIds();
    const missing = Array.from({ length: 60 }, (_, i) => i + 1).filter((id) => !documented.has(id));
    assert.deepEqual(missing, [], `no section for ${missing.map((id) => `C${id}`).join(', ')}`);
    assert.match(decisions, /<a id="c46a"><\/a>\n### C46a\./);
  });

  test('a section that links to its reasons links to an entry of choices.md made for it', () => {
    const choices = read('docs/choices.md');
    const wrong: string[] = [];
    for (const m of decisions.matchAll(/^#{2,4}\s+(C\d+a?)\.[\s\S]*?(?=^#{2,4}\s+C\d+a?\.|(?![\s\S]))/gm)) {
      const id = (m[1] as string).toLowerCase();
      for (const why of m[0].matchAll(/choices\.md#(why-c\d+a?)/g)) {
        if (why[1] !== `why-${id}` || !choices.includes(`<a id="why-${id}"></a>`)) wrong.push(`${m[1]} -> ${why[1]}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  test('every contract id cited in src/, README.md or docs/ has a section', () => {
    const documented = documentedIds();
    const sources = [...filesUnder(path.join(root, 'src')), path.join(root, 'README.md'), ...docFiles.map((f) => path.join(root, f))];
    const undocumented: string[] = [];
    for (const file of sources) {
      for (const { id, line } of citedIds(readFileSync(file, 'utf8'))) {
        if (!documented.has(id)) undocumented.push(`C${id} at ${path.relative(root, file)}:${line}`);
      }
    }
    assert.deepEqual(undocumented, [], 'cited ids without a section in docs/decisions.md');
  });

  test('links inside docs/decisions.md point at anchors and files that exist', () => {
    assert.deepEqual(brokenLinks('docs/decisions.md'), []);
  });
});

describe('README.md', () => {
  const readme = read('README.md');

  test('is a front door of at most 200 lines', () => {
    const lines = readme.split('\n').length - (readme.endsWith('\n') ? 1 : 0);
    assert.ok(lines <= 200, `README.md has ${lines} lines`);
  });

  test('its table of contents links every file of docs/, and every docs/ link names a file that exists', () => {
    const linked = linkTargets(readme)
      .filter((t) => t.startsWith('docs/'))
      .map((t) => t.split('#')[0] as string);
    for (const f of linked) assert.ok(existsSync(path.join(root, f)), `${f} exists`);
    assert.deepEqual(docFiles.filter((f) => !linked.includes(f)), [], 'files of docs/ the README does not link');
  });

  test('it names no file outside the repository', () => {
    for (const file of ['README.md', ...topicFiles]) {
      const outside = ['../shared', 'contract.md', 'gateway-spec', 'STYLE.md'].filter((s) => read(file).includes(s));
      assert.deepEqual(outside, [], file);
    }
  });

  test('every contract id it or a topic file of docs/ mentions is a link to its section in docs/decisions.md', () => {
    for (const file of ['README.md', ...topicFiles]) {
      const prefix = file === 'README.md' ? 'docs\\/decisions\\.md' : 'decisions\\.md';
      // Ids inside code (`// C12: ...`) are examples and cannot be links; keep line numbers intact.
      const prose = read(file)
        .replace(/```[\s\S]*?```/g, (block) => block.replace(/[^\n]/g, ''))
        .replace(/`[^`\n]*`/g, '')
        .replace(new RegExp(`\\[C(\\d+)\\]\\(${prefix}#c\\1\\)`, 'g'), '');
      const unlinked = citedIds(prose).map(({ id, line }) => `C${id} at ${file}:${line}`);
      assert.deepEqual(unlinked, []);
    }
  });

  test('it says where the ids in code comments are explained', () => {
    assert.match(readme, /\]\(docs\/decisions\.md\)/);
  });
});

describe('README.md and docs/ cite no tracker outside the repository', () => {
  for (const file of ['README.md', ...docFiles]) {
    test(`${file} names no issue by its number`, () => {
      const cited = read(file)
        .split('\n')
        .flatMap((l, i) => (/\bissues? #?\d+|\bissue \d+'s\b/i.test(l) ? [`${file}:${i + 1}`] : []));
      assert.deepEqual(cited, []);
    });
  }
});

describe('the code and its tests cite no tracker outside the repository', () => {
  // A comment or a test name says the reason or the contract id (C<n>), never a tracker's number.
  const code = ['src', 'test', 'scripts', 'web/src']
    .flatMap((dir) => filesUnder(path.join(root, dir)))
    .filter((f) => /\.(?:[cm]?[jt]sx?|sql|sh)$/.test(f))
    .map((f) => path.relative(root, f));
  test('it finds the modules, tests, scripts and migrations', () => {
    assert.ok(code.length > 300, `found ${code.length} files`);
    assert.ok(code.some((f) => f.endsWith('.sql')));
  });
  test('no file of src/, test/, scripts/ or web/src/ names an issue by its number', () => {
    const cited = code.flatMap((file) =>
      read(file)
        .split('\n')
        .flatMap((l, i) => (/\bissues? #?\d+|\bissue \d+'s\b/i.test(l) ? [`${file}:${i + 1}`] : [])),
    );
    assert.deepEqual(cited, []);
  });
});

describe('links in README.md and docs/', () => {
  for (const file of ['README.md', ...docFiles]) {
    test(`every relative link of ${file} points at a file, folder or heading that exists`, () => {
      assert.deepEqual(brokenLinks(file), []);
    });
  }
});

describe('the Layout section of docs/development.md', () => {
  test('names every folder of src/, and no folder that is not there', () => {
    const doc = read('docs/development.md');
    const layout = doc.slice(doc.indexOf('## Layout'));
    const named = new Set([...layout.matchAll(/^src\/([a-z-]+)\/ /gm)].map((m) => m[1] as string));
    const folders = readdirSync(path.join(root, 'src')).filter((n) => statSync(path.join(root, 'src', n)).isDirectory());
    assert.deepEqual([...named].sort(), folders.sort());
  });
});
