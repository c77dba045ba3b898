// The dashboard's sign-up page (C4).
import { useState } from 'preact/hooks';
import { signUp, useApi } from '../api.ts';
import { useForm } from '../components/form.ts';
import { ErrorBanner, Link, Page } from '../components/page.tsx';
import { loadPlans, planSummary } from '../components/plans.ts';
import { navigate } from '../router.ts';

export default function SignUp() {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const form = useForm();
  const fields = form.fields;
  // The free plan as configured (GET /plans), never figures written here.
  const plans = useApi(loadPlans);
  const free = plans.data?.find((p) => p.tier === 'free');

  const submit = async (e: Event) => {
    e.preventDefault();
    await form.submit(
      async () => {
        await signUp(name.trim(), email.trim(), password);
        // A newcomer's first step: a key.
        navigate('/keys?welcome=1', { replace: true });
      },
      { stayBusy: true },
    );
  };

  return (
    <Page
      title="Create an account"
      intro={free ? <span data-testid="free-plan">Free plan: {planSummary(free.limits)}; no card.</span> : 'A free account, no card.'}
    >
      <article class="auth-card">
        <form onSubmit={(e) => void submit(e)} noValidate>
          <ErrorBanner error={form.error} />
          <label for="signup-name">
            Name
            <input id="signup-name" autocomplete="name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-invalid={fields.name ? true : undefined} />
          </label>
          <label for="signup-email">
            E-mail
            <input id="signup-email" type="email" autocomplete="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} aria-invalid={fields.email ? true : undefined} />
          </label>
          <label for="signup-password">
            Password
            <input
              id="signup-password"
              type="password"
              autocomplete="new-password"
              required
              minLength={8}
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
              aria-invalid={fields.password ? true : undefined}
              aria-describedby="signup-password-help"
            />
            <small id="signup-password-help">At least 8 characters, not a common password.</small>
          </label>
          <button type="submit" aria-busy={form.busy} disabled={form.busy}>
            Create account
          </button>
        </form>
        <p>
          Already have an account? <Link href="/signin">Sign in</Link>.
        </p>
      </article>
    </Page>
  );
}
