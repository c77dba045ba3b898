// `npm run bench -- events` (`npm run bench:events`): the chain-event sections in order, the block
// follower's catch-up (follower-catchup.ts), then webhook delivery (webhook-delivery.ts). Each
// section prints its own figures; both land in one JSON.
import { defineScenario } from '../lib/scenario.ts';
import { main as followerCatchUp, OPTIONS as FOLLOWER } from './follower-catchup.ts';
import { main as webhookDelivery, OPTIONS as WEBHOOKS } from './webhook-delivery.ts';

export default defineScenario({
  summary: 'the chain-event sections: follower-catchup, then webhook-delivery',
  options: { ...FOLLOWER, ...WEBHOOKS },
  run: async ({ opt }) => {
    await followerCatchUp(opt);
    await webhookDelivery(opt);
  },
});
