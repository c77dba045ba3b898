// One error tree: every error class in src/ extends BaseError, pins a static code and
// lives in src/errors/; no two classes share a name; `throw new Error(` is left only where the
// code itself would be wrong, each place listed below with why. Read from the source with the
// TypeScript parser, so a new class or a new plain throw fails here before review.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = path.join(root, 'src');

/** The plain built-in errors: a class extending one of these directly is not in the tree. */
const BUILT_IN = new Set(['Error', 'TypeError', 'RangeError', 'SyntaxError', 'AggregateError', 'EvalError', 'ReferenceError', 'URIError']);

/**
 * `throw new Error(` kept on purpose: reaching one means the calling code is wrong (an argument
 * checked before, an order of calls), not that a user, a config, a node or storage did something.
 * Keyed by file and the start of the message, so lines may move; a new one, or one gone, fails.
 */
const PLAIN_THROWS_ALLOWED: ReadonlyArray<{ file: string; message: string; why: string }> = [
  { file: 'src/http/server-timeouts.ts', message: 'applyServerTimeouts: call it before', why: 'main calls it before listen; a later call is a wiring bug' },
  { file: 'src/intents/service.ts', message: 'route checked above', why: 'the route was looked up and refused a few lines above' },
  { file: 'src/webhooks/events.ts', message: 'not a decimal string', why: 'both sides are decimals: formatUnits output and a minValue normalised when stored' },
  { file: 'src/onchain/artifacts.ts', message: 'not a contract name', why: 'contract names are constants in the code, never input' },
  { file: 'src/devnet/feeds.ts', message: 'not a price', why: 'prices come from the devnet code and tests that call setPrice' },
  { file: 'src/devnet/devnet.ts', message: 'devnet: network "', why: 'setPrice asked for a network without a feed: the calling test is wrong' },
  { file: 'src/prices/money.ts', message: 'not a price', why: 'prices reach it checked by Prices (finite, not negative)' },
  { file: 'src/main.ts', message: 'storage did not open', why: 'a storage that did not open rejected and was thrown the line above' },
  { file: 'src/upstreams/upstreams.ts', message: 'no upstream pool for', why: 'callers ask for networks of the registry, which all have pools' },
  { file: 'src/upstreams/upstreams.ts', message: 'no upstreams for', why: 'callers ask for networks of the registry, which all have upstreams' },
  { file: 'src/upstreams/http/state.ts', message: 'network ', why: 'upstream URLs were checked by the config schema (format uri) before' },
  { file: 'src/cluster/worker.ts', message: 'a worker runs with an IPC channel', why: 'the worker start runs only in processes the cluster primary forked, which always have the channel' },
  { file: 'src/storage/ipc.ts', message: 'no handler for', why: 'every topic is registered by the primary before it forks a worker; an unknown one is a wiring bug, answered to the caller as an error' },
  { file: 'src/storage/pglite-worker.ts', message: 'pglite-worker.ts runs as a worker thread', why: 'the file is only ever started by pglite-remote.ts as a worker; imported elsewhere is a wiring bug' },
];

/**
 * Converted on other branches of the same change (the files are edited there at the same time):
 * the person merging empties these two lists; the test then holds the rule everywhere.
 */
const CONVERTED_ON_OTHER_BRANCHES = {
  /** Error classes not yet in the tree or not yet in src/errors/, as `file: class`. */
  classes: new Set<string>(),
  /** Plain throws that are not invariants, as `file: message start`. */
  throws: [] as Array<{ file: string; message: string }>,
};

interface ClassInfo {
  name: string;
  file: string;
  line: number;
  base: string | undefined;
  staticCode: boolean;
}

interface PlainThrow {
  file: string;
  line: number;
  message: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The text of a thrown message: a string or template literal as written, without quotes. */
function messageText(arg: ts.Expression | undefined, sf: ts.SourceFile): string {
  if (!arg) return '';
  if (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg)) return arg.text;
  if (ts.isTemplateExpression(arg)) return arg.getText(sf).slice(1, -1);
  return arg.getText(sf);
}

/** `new Error(...)` (or another built-in error) as thrown, also inside `Object.assign(new Error(...), ...)`. */
function plainErrorOf(expr: ts.Expression): ts.NewExpression | undefined {
  if (ts.isNewExpression(expr) && ts.isIdentifier(expr.expression) && BUILT_IN.has(expr.expression.text)) return expr;
  if (ts.isCallExpression(expr) && expr.expression.getText() === 'Object.assign' && expr.arguments[0]) return plainErrorOf(expr.arguments[0]);
  return undefined;
}

function scan(): { classes: ClassInfo[]; throws: PlainThrow[] } {
  const classes: ClassInfo[] = [];
  const throws: PlainThrow[] = [];
  for (const full of sourceFiles(SRC)) {
    const file = path.relative(root, full).split(path.sep).join('/');
    const sf = ts.createSourceFile(full, readFileSync(full, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const lineOf = (node: ts.Node) => sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    const visit = (node: ts.Node): void => {
      if (ts.isClassDeclaration(node) && node.name) {
        const heritage = node.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0]?.expression;
        const staticCode = node.members.some(
          (m) =>
            (ts.isPropertyDeclaration(m) || ts.isGetAccessorDeclaration(m)) &&
            ts.getCombinedModifierFlags(m) & ts.ModifierFlags.Static &&
            m.name.getText(sf) === 'code',
        );
        classes.push({ name: node.name.text, file, line: lineOf(node), base: heritage?.getText(sf), staticCode });
      }
      if (ts.isThrowStatement(node)) {
        const plain = plainErrorOf(node.expression);
        if (plain) throws.push({ file, line: lineOf(node), message: messageText(plain.arguments?.[0], sf) });
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return { classes, throws };
}

const { classes, throws } = scan();
const byName = new Map<string, ClassInfo>();
for (const c of classes) if (!byName.has(c.name)) byName.set(c.name, c);
const where = (c: ClassInfo) => `${c.file}:${c.line} ${c.name}`;
const known = (c: ClassInfo) => CONVERTED_ON_OTHER_BRANCHES.classes.has(`${c.file}: ${c.name}`);

/** The chain of classes from `c` up to the first base not declared in src/ (its name as the last item). */
function chainOf(c: ClassInfo): Array<ClassInfo | string> {
  const chain: Array<ClassInfo | string> = [c];
  let cur: ClassInfo | undefined = c;
  while (cur?.base !== undefined) {
    const next = byName.get(cur.base);
    if (!next || chain.includes(next)) {
      chain.push(cur.base);
      break;
    }
    chain.push(next);
    cur = next;
  }
  return chain;
}

const reachesBuiltIn = (c: ClassInfo) => {
  const last = chainOf(c).at(-1);
  return typeof last === 'string' && (BUILT_IN.has(last) || last.endsWith('Error'));
};
const baseError = byName.get('BaseError');
const errorClasses = classes.filter((c) => c !== baseError && reachesBuiltIn(c));

describe('the error tree', () => {
  test('the source scan finds BaseError in src/errors/base.ts and the error classes around it', () => {
    assert.equal(baseError?.file, 'src/errors/base.ts');
    assert.ok(baseError.staticCode, 'BaseError declares the static code');
    assert.ok(errorClasses.length >= 30, `only ${errorClasses.length} error classes found`);
    assert.ok(errorClasses.some((c) => c.name === 'ConfigError'));
  });

  test('every error class declared in src/ extends BaseError', () => {
    const outside = errorClasses.filter((c) => !known(c) && !chainOf(c).includes(baseError as ClassInfo));
    assert.deepEqual(outside.map(where), [], 'extend BaseError (src/errors/base.ts) instead');
  });

  test('every error class pins a static code, itself or through a class of src/errors/ below BaseError', () => {
    const missing = errorClasses.filter((c) => {
      if (known(c)) return false;
      return !chainOf(c).some((k) => typeof k !== 'string' && k !== baseError && k.staticCode && (k === c || k.file.startsWith('src/errors/')));
    });
    assert.deepEqual(missing.map(where), [], "declare `static override code` (an UPPER_SNAKE string, or the JSON-RPC number in errors/rpc.ts)");
  });

  test('every error class is declared in src/errors/', () => {
    const elsewhere = errorClasses.filter((c) => !known(c) && !c.file.startsWith('src/errors/'));
    assert.deepEqual(elsewhere.map(where), [], 'move the class to src/errors/ and import it from there');
  });

  test('no two classes in src/ share a name', () => {
    const seen = new Map<string, ClassInfo[]>();
    for (const c of classes) seen.set(c.name, [...(seen.get(c.name) ?? []), c]);
    const shared = [...seen.values()].filter((list) => list.length > 1 && !list.every(known)).map((list) => list.map(where).join(' and '));
    assert.deepEqual(shared, []);
  });

  test('throw new Error( remains only at the listed invariants', () => {
    const listed = [...PLAIN_THROWS_ALLOWED, ...CONVERTED_ON_OTHER_BRANCHES.throws];
    const matches = (t: PlainThrow, e: { file: string; message: string }) => t.file === e.file && t.message.startsWith(e.message);
    const unlisted = throws.filter((t) => !listed.some((e) => matches(t, e))).map((t) => `${t.file}:${t.line} ${t.message}`);
    assert.deepEqual(unlisted, [], 'throw a BaseError subclass (src/errors/), or list the line in PLAIN_THROWS_ALLOWED with why it cannot happen');
    const gone = listed.filter((e) => !throws.some((t) => matches(t, e))).map((e) => `${e.file}: ${e.message}`);
    assert.deepEqual(gone, [], 'no such throw any more: remove it from the list');
  });

  test('each allowed plain throw says why it cannot happen', () => {
    for (const e of PLAIN_THROWS_ALLOWED) assert.ok(e.why.length > 10, `${e.file}: ${e.message}`);
  });

  test('the classes listed as converted on other branches are still unconverted here', () => {
    const stale = [...CONVERTED_ON_OTHER_BRANCHES.classes].filter((entry) => {
      const c = classes.find((k) => `${k.file}: ${k.name}` === entry);
      return !c || (chainOf(c).includes(baseError as ClassInfo) && c.file.startsWith('src/errors/'));
    });
    assert.deepEqual(stale, [], 'remove these from CONVERTED_ON_OTHER_BRANCHES.classes');
  });
});
