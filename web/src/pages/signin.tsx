import { useState } from 'preact/hooks';
import { fieldErrors, signIn } from '../api.ts';
import { ErrorBanner, Link, Page } from '../components/page.tsx';
import { HOME_SIGNED_IN, navigate, useLocation } from '../router.ts';

/** Where to go after signing in: the page that sent the guest here, if it is one of ours. */
export function nextPath(query: URLSearchParams): string {
  const next = query.get('next');
  return next && next.startsWith('/') && !next.startsWith('//') ? next : HOME_SIGNED_IN;
}

export default function SignIn() {
  const { query } = useLocation();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const fields = fieldErrors(error);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await signIn(email.trim(), password);
      navigate(nextPath(query), { replace: true });
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <Page title="Sign in">
      <article class="auth-card">
        <form onSubmit={(e) => void submit(e)} noValidate>
          <ErrorBanner error={error} />
          <label for="signin-email">
            E-mail
            <input id="signin-email" type="email" autocomplete="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} aria-invalid={fields.email ? true : undefined} />
          </label>
          <label for="signin-password">
            Password
            <input id="signin-password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
          </label>
          <button type="submit" aria-busy={busy} disabled={busy}>
            Sign in
          </button>
        </form>
        <p>
          New here? <Link href="/signup">Create an account</Link>: the free plan needs no card.
        </p>
      </article>
    </Page>
  );
}
