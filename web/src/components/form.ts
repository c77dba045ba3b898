// What a form (or a row of action buttons) keeps while it talks to the gateway: busy, the error
// to show, and the 400's messages by field (C7 `details`) to put next to the inputs.
import { useState } from 'preact/hooks';
import { fieldErrors } from '../api.ts';

export interface FormOptions<E> {
  /** What the page shows for a failure (default: the error itself, which `<ErrorBanner>` puts in words). */
  shownError?: (err: unknown) => E;
  /** A field the 400 names, as the form's inputs are called (`filters.addresses.0` → `addresses`). */
  fieldName?: (field: string) => string;
}

export interface Form<E> {
  /** From `submit` until its action settles; after a success too with `stayBusy` (the page moves on). */
  busy: boolean;
  /** The `what` of the busy action, for buttons that share one form. */
  doing: string | undefined;
  error: E | undefined;
  /** Messages by field: the last failure's, or those the page set. */
  fields: Record<string, string>;
  setError: (error: E | undefined) => void;
  setFields: (fields: Record<string, string>) => void;
  /** Drops one field's message (its input changed). */
  forget: (field: string) => void;
  /** A new try: no error, no field message. */
  clear: () => void;
  /**
   * Runs `action`: clears the last error and field messages and is busy until it settles. A
   * failure becomes `error` (through `shownError`) and `fields`; nothing is thrown.
   */
  submit: (action: () => Promise<unknown>, opts?: { what?: string; stayBusy?: boolean }) => Promise<void>;
}

/** A form's state for calls to the gateway: `busy`, `error`, `fields` and the `submit` that sets them. */
export function useForm<E = unknown>(options: FormOptions<E> = {}): Form<E> {
  const [busy, setBusy] = useState(false);
  const [doing, setDoing] = useState<string | undefined>(undefined);
  const [error, setError] = useState<E | undefined>(undefined);
  const [fields, setFields] = useState<Record<string, string>>({});
  const clear = () => {
    setError(undefined);
    setFields({});
  };
  const idle = () => {
    setBusy(false);
    setDoing(undefined);
  };
  return {
    busy,
    doing,
    error,
    fields,
    setError,
    setFields,
    forget: (field) => {
      if (fields[field]) setFields(({ [field]: _, ...rest }) => rest);
    },
    clear,
    submit: async (action, opts = {}) => {
      clear();
      setBusy(true);
      setDoing(opts.what);
      try {
        await action();
        if (!opts.stayBusy) idle();
      } catch (err) {
        const named: Record<string, string> = {};
        for (const [field, message] of Object.entries(fieldErrors(err))) named[options.fieldName ? options.fieldName(field) : field] = message;
        setFields(named);
        setError(options.shownError ? options.shownError(err) : (err as E));
        idle();
      }
    },
  };
}
