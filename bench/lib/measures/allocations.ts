// Bytes a process allocates while a load runs, counted from outside through its inspector port
// (`--inspect=127.0.0.1:PORT`): V8's sampling heap profiler with the objects the young and old
// collections freed kept in its account, so it counts what was made, not what lived; or, with
// `kept`, only what outlived a young collection (promoted to the old generation, or alive at the
// end): what makes scavenges long and the old generation's collections frequent.
import WebSocket from 'ws';

/** Bytes allocated during `during`, in all and by allocating function (`name file:line`), largest first. */
export interface Allocations {
  bytes: number;
  sites: Array<{ site: string; bytes: number }>;
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

export async function allocationsDuring(inspectPort: number, during: () => Promise<void>, opts: { samplingInterval?: number; kept?: boolean } = {}): Promise<Allocations> {
  const targets = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${inspectPort}`);
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  let next = 0;
  const waiting = new Map<number, (result: unknown) => void>();
  ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown };
    if (m.id !== undefined) waiting.get(m.id)?.(m.result);
  });
  const post = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve) => {
      const id = ++next;
      waiting.set(id, resolve as (r: unknown) => void);
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: opts.samplingInterval ?? 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: opts.kept !== true });
    await during();
    const { profile } = await post<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
    const bySite = new Map<string, number>();
    let bytes = 0;
    const walk = (node: ProfileNode): void => {
      const f = node.callFrame;
      const site = `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}`;
      bytes += node.selfSize;
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
      for (const child of node.children) walk(child);
    };
    walk(profile.head);
    return { bytes, sites: [...bySite].map(([site, b]) => ({ site, bytes: b })).sort((a, b) => b.bytes - a.bytes) };
  } finally {
    ws.close();
  }
}
