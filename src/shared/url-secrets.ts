/**
 * Hosted node providers put their API key in the URL: in its path (Infura, Alchemy, QuickNode), in
 * its query (`?apikey=`) or in its user part. Such a URL must not reach a log line or an answer
 * whole. `urlSecretRedactor` blanks those parts out of any text: every URL on a configured host
 * keeps only its scheme and host, and the secret-looking parts themselves are blanked wherever
 * they appear (a node that echoes its request path in an error, a library that quotes it).
 */

export const REDACTED = '[redacted]';

/** Parts shorter than this are blanked only inside a URL: elsewhere they would blank plain words. */
const MIN_LOOSE_SECRET = 6;

/** An absolute URL in running text: scheme, then everything up to a space, quote or angle bracket. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>\\`]+/gi;

interface Secrets {
  hosts: Set<string>;
  tokens: Set<string>;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function collect(url: string, into: Secrets): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return;
  }
  if (!parsed.host) return;
  into.hosts.add(parsed.host.toLowerCase());
  into.hosts.add(parsed.hostname.toLowerCase());
  const add = (part: string) => {
    for (const form of [part, safeDecode(part)]) {
      if (form.length >= MIN_LOOSE_SECRET) into.tokens.add(form);
    }
  };
  add(parsed.username);
  add(parsed.password);
  // Clients send the user part as HTTP Basic credentials, which a node may quote back.
  if (parsed.username || parsed.password) {
    const credentials = `${safeDecode(parsed.username)}:${safeDecode(parsed.password)}`;
    add(Buffer.from(credentials).toString('base64'));
  }
  if (parsed.pathname !== '/') {
    add(parsed.pathname);
    for (const segment of parsed.pathname.split('/')) add(segment);
  }
  if (parsed.search) {
    add(parsed.search.slice(1));
    for (const [, value] of parsed.searchParams) add(value);
    for (const pair of parsed.search.slice(1).split('&')) add(pair.slice(pair.indexOf('=') + 1));
  }
}

/** The authority's host (and port) of a URL found in text, lower-cased; userinfo dropped. */
function hostOf(rest: string): string {
  const end = rest.search(/[/?#]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  return authority.slice(authority.lastIndexOf('@') + 1).toLowerCase();
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A function that blanks the secret parts of `urls` out of a text (a log line, an error message),
 * or undefined when none of them has a part to hide.
 */
export function urlSecretRedactor(urls: readonly string[]): ((text: string) => string) | undefined {
  const secrets: Secrets = { hosts: new Set(), tokens: new Set() };
  for (const url of urls) collect(url, secrets);
  if (secrets.hosts.size === 0) return undefined;
  // Each token as written and as JSON writes it (a log line is JSON), longest first.
  const forms = new Set<string>();
  for (const token of secrets.tokens) {
    forms.add(token);
    forms.add(JSON.stringify(token).slice(1, -1));
  }
  const loose =
    forms.size === 0
      ? undefined
      : new RegExp(
          [...forms]
            .sort((a, b) => b.length - a.length)
            .map(escapeRegExp)
            .join('|'),
          'g',
        );
  const { hosts } = secrets;
  return (text: string): string => {
    let out = text.replace(URL_IN_TEXT, (found) => {
      const schemeEnd = found.indexOf('://') + 3;
      const rest = found.slice(schemeEnd);
      const host = hostOf(rest);
      const bare = rest.length === host.length || (rest.length === host.length + 1 && rest.endsWith('/'));
      if (bare || !hosts.has(host)) return found;
      return `${found.slice(0, schemeEnd)}${host}/${REDACTED}`;
    });
    if (loose) out = out.replace(loose, REDACTED);
    return out;
  };
}
