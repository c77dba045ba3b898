// Errors that stop the start: a bad setting, a bad command line, something outside not reachable.
import { BaseError } from './base.ts';

/** A setting that stops the start, naming what is wrong. */
export class ConfigError extends BaseError {
  override name = 'ConfigError';
  static override code = 'CONFIG_ERROR';
}

/** A command line the gateway does not understand: one line, and a pointer to `--help`. */
export class UsageError extends BaseError {
  override name = 'UsageError';
  static override code = 'USAGE_ERROR';
}

/**
 * A start that cannot go on for a reason outside the program (a port in use, a database or Redis
 * that does not answer): main prints its message as one plain line, no stack, and exits 1.
 */
export class StartError extends BaseError {
  override name = 'StartError';
  static override code = 'START_ERROR';
}
