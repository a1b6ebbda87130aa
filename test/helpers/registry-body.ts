/** A valid registry create body using every metadata type, for tests to use or to break. */
export function sampleRegistryBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    title: 'Warehouse 7 inventory',
    metadata: [
      { type: 'TEXT', key: 'owner', value: 'Ada Lovelace', title: 'Owner' },
      { type: 'NUMBER', key: 'pallets', value: '-12.5e2' },
      { type: 'DATE', key: 'audited', value: '2026-02-28' },
      { type: 'BOOLEAN', key: 'insured', value: 'true' },
      { type: 'URL', key: 'site', value: 'https://example.com/w7' },
      { type: 'EMAIL', key: 'contact', value: 'ada@example.com' },
      { type: 'FILE', key: 'photo', file: 'data:image/png;base64,iVBORw0KGgo=' },
    ],
    folder_id: 'warehouses',
    template: 'STORAGE',
    description: 'Quarterly audit',
    ...overrides,
  };
}

/** What the PASS tests read of a registry view. */
export interface PassView {
  id: string;
  title: string;
  template: string;
  revoked_at: string | null;
  metadata: unknown[];
  description: string | null;
}

/** A valid PASS create body. */
export const passBody = (overrides: Record<string, unknown> = {}) =>
  sampleRegistryBody({
    template: 'PASS',
    title: 'Concert ticket, row 7',
    folder_id: 'tickets',
    ...overrides,
  });
