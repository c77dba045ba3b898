// The compiled contracts of contracts/*.sol, as checked in under contracts/build/ by
// `npm run compile:contracts` (test/contracts/build.test.ts keeps them in step with the sources):
// the intents read the settlers' ABIs from them, the devnet and `npm run deploy:settlers` deploy
// their bytecode. Read at run time, never compiled at start: solc takes seconds. src/onchain/
// holds what faucet, balance, intents and devnet share about talking to a chain (named apart from
// src/chains/, which holds the networks).
import { readFileSync } from 'node:fs';
import type { Abi, Hex } from 'viem';
import { DevnetError } from '../errors/devnet.ts';

/** One contract's artifact (contracts/build/<contractName>.json). */
export interface ContractArtifact {
  contractName: string;
  sourceName: string;
  abi: Abi;
  /** Creation code, without constructor arguments. */
  bytecode: Hex;
  /** The code an address holds once deployed (what eth_getCode returns). */
  deployedBytecode: Hex;
  solcVersion: string;
}

// From src/onchain/ and from dist/onchain/ alike, the repository root is two levels up (the
// container image copies contracts/build/ next to dist/ for the same reason).
const BUILD_DIR = new URL('../../contracts/build/', import.meta.url);
const loaded = new Map<string, ContractArtifact>();

/** The artifact of `contractName`; read once, then kept. Throws naming the file when it is missing or malformed. */
export function loadArtifact(contractName: string): ContractArtifact {
  const hit = loaded.get(contractName);
  if (hit) return hit;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(contractName)) throw new Error(`not a contract name: ${contractName}`);
  const file = new URL(`${contractName}.json`, BUILD_DIR);
  let parsed: Partial<ContractArtifact>;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<ContractArtifact>;
  } catch (err) {
    throw new DevnetError(`contract artifact ${file.pathname} cannot be read (${(err as Error).message}); run npm run compile:contracts`);
  }
  if (!Array.isArray(parsed.abi) || !/^0x[0-9a-f]+$/.test(parsed.bytecode ?? '')) {
    throw new DevnetError(`contract artifact ${file.pathname} has no abi or bytecode; run npm run compile:contracts`);
  }
  const artifact = Object.freeze(parsed as ContractArtifact);
  loaded.set(contractName, artifact);
  return artifact;
}
