// `npm run bench:events`: the chain-event sections in order: the block follower's catch-up, then
// webhook delivery when bench/webhook-delivery.ts exists. Each section prints its own figures.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { main as followerCatchUp } from './follower-catchup.ts';

await followerCatchUp(process.argv.slice(2));

const webhooks = new URL('./webhook-delivery.ts', import.meta.url);
if (existsSync(fileURLToPath(webhooks))) {
  const section = (await import(webhooks.href)) as { main(): Promise<void> };
  await section.main();
}
