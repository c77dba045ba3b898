// The gateway's event-loop delay during a measured run, as the gateway measures it
// itself: prom-client's `perf_hooks.monitorEventLoopDelay` behind GET /metrics
// (`junction_nodejs_eventloop_lag_{p99,max}_seconds`), whose histogram starts again at each
// scrape. The bench scrapes once just before a run (which starts it again) and once after it;
// the same scrapes give the scavenges V8 made in between, and the time they held the thread.

/** prom-client's sampling interval (its default): every sample is this plus the delay, so it is taken off. */
const RESOLUTION_MS = 10;

export interface LoopDelay {
  /** The 99th percentile of the delays of a timer that should fire every 10 ms, in ms. */
  p99Ms: number;
  maxMs: number;
  /**
   * V8's scavenges (young-generation collections) since the process started, from prom-client's
   * GC histogram (`junction_nodejs_gc_duration_seconds_count{kind="minor"}`); NaN without it.
   */
  scavenges: number;
  /** The seconds those scavenges held the main thread in all (`..._sum{kind="minor"}`); NaN without it. */
  scavengeSeconds: number;
}

/** Reads the delays since the last scrape (and starts them again); null when /metrics does not answer. */
export async function scrapeLoopDelay(metricsUrl: string): Promise<LoopDelay | null> {
  try {
    const res = await fetch(metricsUrl);
    if (!res.ok) return null;
    const text = await res.text();
    const read = (name: string) => {
      const m = new RegExp(`^junction_nodejs_eventloop_lag_${name}_seconds(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
      return m ? Math.max(0, Number(m[1]) * 1000 - RESOLUTION_MS) : Number.NaN;
    };
    const minor = /^junction_nodejs_gc_duration_seconds_count\{kind="minor"\} (\S+)$/m.exec(text);
    const minorSum = /^junction_nodejs_gc_duration_seconds_sum\{kind="minor"\} (\S+)$/m.exec(text);
    return { p99Ms: read('p99'), maxMs: read('max'), scavenges: minor ? Number(minor[1]) : Number.NaN, scavengeSeconds: minorSum ? Number(minorSum[1]) : Number.NaN };
  } catch {
    return null;
  }
}
