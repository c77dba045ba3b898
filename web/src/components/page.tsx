// Shared pieces of every page (web/PAGES.md): keep their props stable, pages depend on them.
import type { ChartConfiguration, Chart as ChartJs } from 'chart.js';
import type { AnchorHTMLAttributes, ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText } from '../api.ts';
import { onLinkClick } from '../router.ts';
import { useForm } from './form.ts';

/** A link inside the dashboard (no reload). */
export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  return <a {...props} onClick={onLinkClick} />;
}

/** The page's heading (focused after each navigation, for screen readers) and its document title. */
export function Page(props: { title: string; intro?: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · Junction`;
  }, [props.title]);
  return (
    <section class="page">
      <header class="page-head">
        <div>
          <h1 tabIndex={-1}>{props.title}</h1>
          {props.intro ? <p class="muted">{props.intro}</p> : null}
        </div>
        {props.actions ? <div class="page-actions">{props.actions}</div> : null}
      </header>
      {props.children}
    </section>
  );
}

async function writeClipboard(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Plain http on another host is not a secure context: the old way still works there.
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  const ok = document.execCommand('copy');
  area.remove();
  if (!ok) throw new Error('copy refused');
}

/** A button that copies `text`; says "Copied" (announced to screen readers) for two seconds. */
export function CopyButton(props: { text: string; label?: string; class?: string }) {
  const [done, setDone] = useState<'idle' | 'copied' | 'failed'>('idle');
  useEffect(() => {
    if (done === 'idle') return;
    const t = setTimeout(() => setDone('idle'), 2000);
    return () => clearTimeout(t);
  }, [done]);
  const label = props.label ?? 'Copy';
  return (
    <button
      type="button"
      class={`copy secondary outline ${props.class ?? ''}`}
      aria-label={done === 'idle' ? label : done === 'copied' ? 'Copied' : 'Copy failed: select the text instead'}
      onClick={() => writeClipboard(props.text).then(() => setDone('copied'), () => setDone('failed'))}
    >
      <span aria-live="polite">{done === 'idle' ? 'Copy' : done === 'copied' ? 'Copied' : 'Select and copy'}</span>
    </button>
  );
}

/** A value in monospace with its copy button (keys, addresses, snippets). */
export function Copyable(props: { text: string; label: string; multiline?: boolean }) {
  return (
    <div class={props.multiline ? 'copyable multiline' : 'copyable'}>
      {props.multiline ? <pre tabIndex={0} aria-label={props.label}><code>{props.text}</code></pre> : <code aria-label={props.label}>{props.text}</code>}
      <CopyButton text={props.text} label={`Copy ${props.label}`} />
    </div>
  );
}

/** What a list shows when it has nothing; `children` says how to get something (a button or a link). */
export function EmptyState(props: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty" role="status">
      <p class="empty-title">{props.title}</p>
      {props.children}
    </div>
  );
}

/** An error in words (the C7 message), never raw JSON; nothing when `error` is empty. */
export function ErrorBanner(props: { error: unknown; onDismiss?: () => void }) {
  if (props.error === undefined || props.error === null) return null;
  return (
    <div class="banner error" role="alert">
      <span>{errorText(props.error)}</span>
      {props.onDismiss ? (
        <button type="button" class="secondary outline small" onClick={props.onDismiss}>
          Dismiss
        </button>
      ) : null}
    </div>
  );
}

/** A success note (after a change). */
export function Notice(props: { children: ComponentChildren }) {
  return (
    <div class="banner ok" role="status">
      {props.children}
    </div>
  );
}

/** A loading line, announced politely. */
export function Loading(props: { what?: string }) {
  return (
    <p aria-busy="true" class="muted">
      Loading{props.what ? ` ${props.what}` : ''}…
    </p>
  );
}

/**
 * A modal confirmation (the browser's own <dialog>: Escape cancels, focus stays inside).
 * `onConfirm` may return a promise; its error is shown in the dialog and the dialog stays open.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => unknown;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const form = useForm();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) {
      form.setError(undefined);
      d.showModal();
    } else if (!props.open && d.open) d.close();
  }, [props.open]);
  const confirm = () =>
    form.submit(async () => {
      await props.onConfirm();
    });
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={(e) => { e.preventDefault(); props.onCancel(); }}>
      <article>
        <h2 id="confirm-title">{props.title}</h2>
        {props.children}
        <ErrorBanner error={form.error} />
        <footer>
          <button type="button" class="secondary" onClick={props.onCancel} disabled={form.busy}>
            Cancel
          </button>
          <button type="button" class={props.danger ? 'danger' : ''} onClick={() => void confirm()} aria-busy={form.busy} disabled={form.busy}>
            {props.confirmLabel}
          </button>
        </footer>
      </article>
    </dialog>
  );
}

/**
 * A Chart.js chart (loaded on first use, drawn on a canvas: nothing inline for the CSP to refuse).
 * `label` is what a screen reader hears; put the figures in a table or list next to it too.
 */
export function Chart(props: { config: ChartConfiguration; label: string; height?: 'small' | 'medium' }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const chart = useRef<ChartJs | undefined>(undefined);
  useEffect(() => {
    let gone = false;
    void import('chart.js/auto').then(({ default: ChartCtor }) => {
      if (gone || !canvas.current) return;
      chart.current?.destroy();
      chart.current = new ChartCtor(canvas.current, {
        ...props.config,
        options: { responsive: true, maintainAspectRatio: false, animation: false, ...props.config.options },
      });
    });
    return () => {
      gone = true;
      chart.current?.destroy();
      chart.current = undefined;
    };
  }, [props.config]);
  return (
    <div class={`chart ${props.height ?? 'medium'}`}>
      <canvas ref={canvas} role="img" aria-label={props.label} />
    </div>
  );
}

/** 1234567 → "1,234,567". */
export const formatNumber = (n: number | null | undefined): string => (n === null || n === undefined ? '—' : n.toLocaleString('en-US'));

/** An ISO time as "23 Nov 2026, 14:05" in the browser's zone, or "never". */
export const formatTime = (iso: string | null | undefined): string =>
  iso ? new Date(iso).toLocaleString('en-GB', { day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit' }) : 'never';
