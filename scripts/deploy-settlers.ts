// C42: `npm run deploy:settlers -- --network SLUG [--rpc URL]` deploys both settler contracts on one
// network from the checked-in bytecode and prints what to put under `intents.settlers`.
// Keys come from the environment only, never from a file or the command line:
//   SOLVER_PRIVATE_KEY_<SLUG> or SOLVER_PRIVATE_KEY: the solver wallet, the origin settler's oracle;
//   SOLVER_ADDRESS instead, when the solver's key is not on this machine;
//   DEPLOYER_PRIVATE_KEY: who pays for the deployment (default: the solver key).
// The node is --rpc, else the network's first upstream (config, or UPSTREAM_<SLUG>).
import { parseArgs } from 'node:util';
import type { Address, Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { getAddress } from 'viem/utils';
import { envSuffix, loadConfig } from '../src/config/load.ts';
import { deploySettlers } from '../src/intents/deploy.ts';

const KEY = /^0x[0-9a-fA-F]{64}$/;

function fail(message: string): never {
  console.error(`deploy:settlers: ${message}`);
  process.exit(1);
}

const { values } = parseArgs({ options: { network: { type: 'string' }, rpc: { type: 'string' }, config: { type: 'string' } }, allowPositionals: false });
if (!values.network) fail('name the network: npm run deploy:settlers -- --network SLUG');
const config = loadConfig({ configFile: values.config });
const network = config.networks.find((n) => n.slug === values.network);
if (!network) fail(`no network "${values.network}" (known: ${config.networks.map((n) => n.slug).join(', ')})`);
const rpcUrl = values.rpc ?? network.upstreams[0]?.http;
if (!rpcUrl) fail(`no node for ${network.slug}: give --rpc URL or UPSTREAM_${envSuffix(network.slug)}`);

const solverKeyName = process.env[`SOLVER_PRIVATE_KEY_${envSuffix(network.slug)}`] ? `SOLVER_PRIVATE_KEY_${envSuffix(network.slug)}` : 'SOLVER_PRIVATE_KEY';
const solverKey = process.env[solverKeyName];
if (solverKey && !KEY.test(solverKey)) fail(`${solverKeyName} is not a 0x-prefixed private key of 64 hex digits`);
const deployerKey = process.env.DEPLOYER_PRIVATE_KEY ?? solverKey;
if (!deployerKey) fail(`set ${solverKeyName} (or DEPLOYER_PRIVATE_KEY and SOLVER_ADDRESS) in the environment`);
if (!KEY.test(deployerKey)) fail('DEPLOYER_PRIVATE_KEY is not a 0x-prefixed private key of 64 hex digits');
let oracle: Address;
if (solverKey) oracle = privateKeyToAccount(solverKey as Hex).address;
else if (process.env.SOLVER_ADDRESS && /^0x[0-9a-fA-F]{40}$/.test(process.env.SOLVER_ADDRESS)) oracle = getAddress(process.env.SOLVER_ADDRESS);
else fail('set SOLVER_PRIVATE_KEY (or SOLVER_PRIVATE_KEY_<SLUG>), or SOLVER_ADDRESS: the origin settler needs its oracle');

const deployer = privateKeyToAccount(deployerKey as Hex).address;
console.error(`deploying the settlers on ${network.slug} (chain ${network.chainId}) from ${deployer}, oracle ${oracle}...`);
try {
  const { settlers } = await deploySettlers({ chains: [{ slug: network.slug, chainId: network.chainId, rpcUrl }], deployerKey: deployerKey as Hex, oracle });
  console.error(`done. Add this to your config file (intents.settlers), and fund the solver ${oracle} on the networks it fills on:`);
  console.log(JSON.stringify({ intents: { settlers } }, null, 2));
} catch (err) {
  fail(err instanceof Error ? err.message : String(err));
}
