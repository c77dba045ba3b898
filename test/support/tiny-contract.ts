// A hand-assembled contract for client tests, so they need no compiler:
//   constructor: value = 42
//   value() view returns (uint256)
//   store(uint256 v): value = v; emit Stored(msg.sender, v)
//   any other call: revert Nope()
import { type Hex, parseAbi, toEventSelector, toFunctionSelector } from 'viem';

export const TINY_ABI = parseAbi([
  'function value() view returns (uint256)',
  'function store(uint256 v)',
  'event Stored(address indexed by, uint256 value)',
  'error Nope()',
]);

/** The value the constructor stores. */
export const TINY_INITIAL_VALUE = 42n;
/** Calldata no function matches: the call reverts with `Nope()`. */
export const TINY_REVERTING_CALLDATA: Hex = '0x12345678';

type Op = string | { push: Hex } | { label: string } | { jumpdest: string };

const OPCODES: Record<string, number> = {
  STOP: 0x00,
  EQ: 0x14,
  ISZERO: 0x15,
  SHL: 0x1b,
  SHR: 0x1c,
  CALLER: 0x33,
  CALLDATALOAD: 0x35,
  CODECOPY: 0x39,
  MSTORE: 0x52,
  SLOAD: 0x54,
  SSTORE: 0x55,
  JUMPI: 0x57,
  JUMPDEST: 0x5b,
  DUP1: 0x80,
  LOG2: 0xa2,
  RETURN: 0xf3,
  REVERT: 0xfd,
};

/** Assembles opcodes, PUSHn of constants, and one-byte jumps to labels (code under 256 bytes). */
function assemble(ops: Op[]): Hex {
  const size = (op: Op): number =>
    typeof op === 'string' ? 1 : 'push' in op ? 1 + (op.push.length - 2) / 2 : 'label' in op ? 2 : 1;
  const where = new Map<string, number>();
  let at = 0;
  for (const op of ops) {
    if (typeof op === 'object' && 'jumpdest' in op) where.set(op.jumpdest, at);
    at += size(op);
  }
  if (at > 255) throw new Error('tiny contract: code too long for one-byte jumps');
  const hex = (n: number) => n.toString(16).padStart(2, '0');
  let out = '';
  for (const op of ops) {
    if (typeof op === 'string') {
      const code = OPCODES[op];
      if (code === undefined) throw new Error(`tiny contract: unknown opcode ${op}`);
      out += hex(code);
    } else if ('push' in op) {
      const bytes = (op.push.length - 2) / 2;
      out += hex(0x5f + bytes) + op.push.slice(2);
    } else if ('label' in op) {
      const target = where.get(op.label);
      if (target === undefined) throw new Error(`tiny contract: no label ${op.label}`);
      out += hex(0x60) + hex(target);
    } else {
      out += hex(OPCODES.JUMPDEST as number);
    }
  }
  return `0x${out}`;
}

const p = (n: number): Op => ({ push: `0x${n.toString(16).padStart(2, '0')}` });

/** The runtime code, as `eth_getCode` returns it after deployment. */
export const TINY_RUNTIME: Hex = assemble([
  p(0), 'CALLDATALOAD', p(0xe0), 'SHR', // selector
  'DUP1', { push: toFunctionSelector('value()') }, 'EQ', { label: 'value' }, 'JUMPI',
  'DUP1', { push: toFunctionSelector('store(uint256)') }, 'EQ', { label: 'store' }, 'JUMPI',
  { push: toFunctionSelector('Nope()') }, p(0xe0), 'SHL', p(0), 'MSTORE', p(4), p(0), 'REVERT',
  { jumpdest: 'value' }, p(0), 'SLOAD', p(0), 'MSTORE', p(0x20), p(0), 'RETURN',
  { jumpdest: 'store' }, p(4), 'CALLDATALOAD', 'DUP1', p(0), 'SSTORE', p(0), 'MSTORE',
  'CALLER', { push: toEventSelector('Stored(address,uint256)') }, p(0x20), p(0), 'LOG2', 'STOP',
]);

const runtimeLength = (TINY_RUNTIME.length - 2) / 2;
/** Stores 42, then copies the runtime code (which follows at `offset`) out as the contract's code. */
const constructorCode = (offset: number): Hex =>
  assemble([p(Number(TINY_INITIAL_VALUE)), p(0), 'SSTORE', p(runtimeLength), 'DUP1', p(offset), p(0), 'CODECOPY', p(0), 'RETURN']);
const constructorLength = (constructorCode(0).length - 2) / 2;

/** Creation code: the constructor, then the runtime code. */
export const TINY_BYTECODE: Hex = `${constructorCode(constructorLength)}${TINY_RUNTIME.slice(2)}`;
