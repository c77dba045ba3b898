import { BaseError } from './base.ts';

/** The database did something it should not have (a row not written, a stored value of an unknown shape) or could not be created. */
export class StorageError extends BaseError {
  override name = 'StorageError';
  static override readonly code = 'STORAGE_ERROR';
}
