import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Child, freePort, startChild, tempDir, waitUntil } from '../children.ts';

/** The nginx binary on PATH (or in /usr/sbin), or undefined when nginx is not installed. */
export function findNginx(): string | undefined {
  for (const candidate of ['nginx', '/usr/sbin/nginx', '/usr/local/sbin/nginx']) {
    const r = spawnSync(candidate, ['-v'], { encoding: 'utf8' });
    if (r.status === 0) return candidate;
  }
  return undefined;
}

function config(dir: string, port: number, upstreamPort: number): string {
  const p = (name: string) => path.join(dir, name);
  return `daemon off;
worker_processes 1;
pid ${p('nginx.pid')};
error_log ${p('error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${p('tmp/body')};
  proxy_temp_path ${p('tmp/proxy')};
  fastcgi_temp_path ${p('tmp/fastcgi')};
  uwsgi_temp_path ${p('tmp/uwsgi')};
  scgi_temp_path ${p('tmp/scgi')};
  # Reuse connections both ways for the whole run, as the gateway does.
  keepalive_requests 10000000;
  upstream node {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
}

/**
 * Starts nginx in the foreground (one worker, keep-alive upstream, no access log) with a
 * generated config in a temp dir, proxying everything to `upstreamPort`. Returns its base URL.
 */
export async function startNginx(bin: string, upstreamPort: number): Promise<{ child: Child; url: string }> {
  const dir = tempDir('nginx');
  mkdirSync(path.join(dir, 'tmp'));
  const port = await freePort();
  const file = path.join(dir, 'nginx.conf');
  writeFileSync(file, config(dir, port, upstreamPort));
  // -e (nginx >= 1.19.5) keeps the startup error log out of /var/log.
  const child = startChild('nginx', bin, ['-c', file, '-p', dir, '-e', path.join(dir, 'error.log')], { role: 'target' });
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(child, 'answer on its port', async () => (await fetch(url, { method: 'POST', body: '{}' })).ok, 15_000);
  return { child, url };
}
