// The dashboard's sign-in page (C4, C5).
import { useState } from 'preact/hooks';
import { signIn } from '../api.ts';
import { useForm } from '../components/form.ts';
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
  const form = useForm();

  const submit = async (e: Event) => {
    e.preventDefault();
    await form.submit(
      async () => {
        await signIn(email.trim(), password);
        navigate(nextPath(query), { replace: true });
      },
      { stayBusy: true },
    );
  };

  return (
    <Page title="Sign in">
      <article class="auth-card">
        <form onSubmit={(e) => void submit(e)} noValidate>
          <ErrorBanner error={form.error} />
          <label for="signin-email">
            E-mail
            <input id="signin-email" type="email" autocomplete="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} aria-invalid={form.fields.email ? true : undefined} />
          </label>
          <label for="signin-password">
            Password
            <input id="signin-password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
          </label>
          <button type="submit" aria-busy={form.busy} disabled={form.busy}>
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
