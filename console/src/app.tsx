/**
 * The console's shell: signing in with an API token, the navigation, and which view the location's
 * hash names (#/subscriptions, #/log, …). The hash holds only where you are, never the token.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Problem, problemOf, session, whenTokenRefused } from './client';
import { FollowersView, loadFollowedNetworks } from './followers';
import { DeliveryLog } from './log';
import { RegistriesView, RegistryView } from './registries';
import { loadSubscriptionLabels, SubscriptionsView, SubscriptionView } from './subscriptions';
import { ProblemAlert, TextField, useLoaded } from './ui';

type Route =
  | { view: 'subscriptions' }
  | { view: 'subscription'; id: string }
  | { view: 'log' }
  | { view: 'followers' }
  | { view: 'registries' }
  | { view: 'registry'; id: string };

function parseRoute(hash: string): Route {
  const [section, id] = hash.replace(/^#\/?/, '').split('/');
  switch (section) {
    case 'subscriptions':
      return id ? { view: 'subscription', id } : { view: 'subscriptions' };
    case 'log':
      return { view: 'log' };
    case 'followers':
      return { view: 'followers' };
    case 'registries':
      return id ? { view: 'registry', id } : { view: 'registries' };
    default:
      return { view: 'subscriptions' };
  }
}

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    window.addEventListener('hashchange', changed);
    return () => window.removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

function SignIn(props: { onSignedIn: () => void; notice: string | undefined }) {
  const [token, setToken] = useState('');
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  return (
    <main class="sign-in">
      <form
        class="card"
        noValidate
        onSubmit={async (event) => {
          event.preventDefault();
          setBusy(true);
          setProblem(undefined);
          session.signIn(token.trim());
          try {
            // Any authenticated read tells whether the service takes this token.
            await must(api.GET('/api/v1/subscription', { params: { query: { limit: 1 } } }));
            props.onSignedIn();
          } catch (err) {
            session.signOut();
            setProblem(problemOf(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <h1>
          <img src="/console/icon.svg" alt="" width={28} height={28} /> Ledgerhook console
        </h1>
        {props.notice && (
          <p class="notice" role="status">
            {props.notice}
          </p>
        )}
        <ProblemAlert problem={problem} />
        <TextField
          label="API token"
          type="password"
          verbatim
          value={token}
          onValue={setToken}
          hint={
            <>
              The token printed at the service's first start, or one from <code>ledgerhook token create</code>
              . It stays in this tab's session storage and is sent only to this service.
            </>
          }
        />
        <button type="submit" class="primary" disabled={busy || token.trim() === ''}>
          Sign in
        </button>
      </form>
    </main>
  );
}

const NAV: [string, string, Route['view'][]][] = [
  ['#/subscriptions', 'Subscriptions', ['subscriptions', 'subscription']],
  ['#/log', 'Delivery log', ['log']],
  ['#/followers', 'Followers', ['followers']],
  ['#/registries', 'Registries', ['registries', 'registry']],
];

function Console(props: { onSignOut: () => void }) {
  const route = parseRoute(useHash());
  // Network names for the forms and filters: the followed ones (a network is followed once it has
  // a subscription); any configured one can still be typed.
  const networks = useLoaded(() => loadFollowedNetworks().catch(() => []), 'networks');
  const labels = useLoaded(loadSubscriptionLabels, route.view === 'log' ? 'log' : 'other');
  return (
    <>
      <header class="top">
        <a class="brand" href="#/subscriptions">
          <img src="/console/icon.svg" alt="" width={24} height={24} /> Ledgerhook
        </a>
        <nav aria-label="Sections">
          {NAV.map(([href, label, views]) => (
            <a key={href} href={href} aria-current={views.includes(route.view) ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <button type="button" class="quiet" onClick={props.onSignOut}>
          Sign out
        </button>
      </header>
      <main>
        {route.view === 'subscriptions' && <SubscriptionsView networks={networks.data ?? []} />}
        {route.view === 'subscription' && <SubscriptionView key={route.id} id={route.id} />}
        {route.view === 'log' && (
          <section aria-labelledby="log-heading">
            <h2 id="log-heading">Delivery log</h2>
            <p class="muted">
              Every notification of this account's subscriptions, with every attempt to deliver it.
            </p>
            <DeliveryLog subscriptions={labels.data ?? []} />
          </section>
        )}
        {route.view === 'followers' && <FollowersView />}
        {route.view === 'registries' && <RegistriesView />}
        {route.view === 'registry' && <RegistryView key={route.id} id={route.id} />}
      </main>
    </>
  );
}

export function App() {
  const [signedIn, setSignedIn] = useState(session.token() !== null);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  // Signing in checks its token itself: a refusal then is the form's to show.
  const inside = useRef(signedIn);
  inside.current = signedIn;
  useEffect(() => {
    whenTokenRefused(() => {
      if (!inside.current) return;
      session.signOut();
      setNotice('The service no longer accepts that token (revoked?). Sign in again.');
      setSignedIn(false);
    });
  }, []);
  if (!signedIn)
    return (
      <SignIn
        notice={notice}
        onSignedIn={() => {
          setNotice(undefined);
          setSignedIn(true);
        }}
      />
    );
  return (
    <Console
      onSignOut={() => {
        session.signOut();
        setNotice('Signed out: the token is gone from this tab.');
        setSignedIn(false);
      }}
    />
  );
}
