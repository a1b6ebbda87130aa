/**
 * The methods the server answers for each path pattern, so that a known path asked with another
 * method is 405 with `Allow` rather than 404.
 */
export function createRouteTable() {
  const routes: { method: string; pattern: RegExp }[] = [];

  function compile(url: string): RegExp {
    const source = url
      .split('/')
      .map((segment) =>
        segment.startsWith(':')
          ? '[^/]+'
          : segment === '*'
            ? '.*'
            : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('/');
    // The server ignores a trailing slash, so the table does too.
    return new RegExp(`^${source}/?$`);
  }

  return {
    add(method: string, url: string): void {
      routes.push({ method, pattern: compile(url) });
      // Fastify answers HEAD wherever it answers GET.
      if (method === 'GET') routes.push({ method: 'HEAD', pattern: compile(url) });
    },
    /** The methods served for `path` (without its query string), in a stable order. */
    allowed(path: string): string[] {
      const methods = new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method));
      return [...methods].sort();
    },
  };
}

export type RouteTable = ReturnType<typeof createRouteTable>;
