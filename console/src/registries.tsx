/**
 * Registries and their folders: lists, the create form (validated by the API, its messages shown
 * at the fields and metadata entries they name), and one registry with its anchoring status and,
 * once anchored, its receipt.
 */
import { useState } from 'preact/hooks';
import { api, must, type Problem, problemOf, type Registry } from './client';
import {
  Badge,
  Excerpt,
  errorsAt,
  Pager,
  ProblemAlert,
  SelectField,
  ShownOnce,
  Table,
  TextField,
  Time,
  useLoaded,
  usePages,
} from './ui';

const METADATA_TYPES = ['TEXT', 'NUMBER', 'DATE', 'BOOLEAN', 'URL', 'EMAIL', 'FILE'] as const;
type MetadataType = (typeof METADATA_TYPES)[number];

interface Entry {
  type: MetadataType;
  key: string;
  value: string;
}

function anchorState(r: Registry): string {
  return r.anchor?.status ?? 'off';
}

function CreateRegistry(props: { folder: string; onCreated: () => void }) {
  const [title, setTitle] = useState('');
  const [folder, setFolder] = useState(props.folder);
  const [template, setTemplate] = useState<'STORAGE' | 'PASS'>('STORAGE');
  const [description, setDescription] = useState('');
  const [encrypted, setEncrypted] = useState(false);
  const [callbackUrl, setCallbackUrl] = useState('');
  const [entries, setEntries] = useState<Entry[]>([{ type: 'TEXT', key: '', value: '' }]);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [created, setCreated] = useState<
    { id: string; secret?: string; callback_token?: string } | undefined
  >();

  const setEntry = (i: number, change: Partial<Entry>) =>
    setEntries(entries.map((e, j) => (j === i ? { ...e, ...change } : e)));

  const submit = async (event: Event) => {
    event.preventDefault();
    setProblem(undefined);
    try {
      const answer = await must(
        api.POST('/api/v1/registry/create', {
          body: {
            title,
            folder_id: folder,
            template,
            // A row left wholly empty is not an entry; anything else goes to the API as typed.
            metadata: entries
              .filter((e) => e.key !== '' || e.value !== '')
              .map((e) => (e.type === 'FILE' ? { type: e.type, key: e.key, file: e.value } : e)),
            ...(description ? { description } : {}),
            ...(callbackUrl ? { callback_url: callbackUrl } : {}),
            data_encrypted: encrypted,
          },
        }),
      );
      setCreated(answer.data);
      props.onCreated();
    } catch (err) {
      setProblem(problemOf(err));
    }
  };

  if (created)
    return created.secret ? (
      <ShownOnce
        title={`Registry ${created.id} created`}
        values={[
          ['Signing secret of its events', created.secret],
          ['Callback token', created.callback_token ?? ''],
        ]}
        onDismiss={() => setCreated(undefined)}
      />
    ) : (
      <p class="notice" role="status">
        Registry <a href={`#/registries/${created.id}`}>{created.id}</a> created.{' '}
        <button type="button" class="small" onClick={() => setCreated(undefined)}>
          Create another
        </button>
      </p>
    );
  const shown = (p: string) =>
    ['#/title', '#/folder_id', '#/template', '#/description', '#/callback_url', '#/metadata'].some(
      (f) => p === f || p.startsWith(`${f}/`),
    );
  return (
    <form class="card form" noValidate onSubmit={submit} aria-label="New registry">
      <h3>New registry</h3>
      <ProblemAlert problem={problem} shown={shown} />
      <div class="grid">
        <TextField label="Title" value={title} onValue={setTitle} errors={errorsAt(problem, '#/title')} />
        <TextField
          label="Folder"
          value={folder}
          onValue={setFolder}
          errors={errorsAt(problem, '#/folder_id')}
          hint="A new name creates the folder"
        />
        <SelectField
          label="Template"
          value={template}
          onValue={setTemplate}
          options={[
            ['STORAGE', 'STORAGE: a kept record'],
            ['PASS', 'PASS: with a public verification page'],
          ]}
          errors={errorsAt(problem, '#/template')}
        />
        <TextField
          label="Callback URL"
          type="url"
          value={callbackUrl}
          onValue={setCallbackUrl}
          errors={errorsAt(problem, '#/callback_url')}
          hint="Optional: receives registry events"
        />
        <TextField
          label="Description"
          rows={2}
          value={description}
          onValue={setDescription}
          errors={errorsAt(problem, '#/description')}
        />
        <label class="check">
          <input
            type="checkbox"
            checked={encrypted}
            onChange={(e) => setEncrypted(e.currentTarget.checked)}
          />
          Encrypt metadata and description at rest
        </label>
      </div>
      <fieldset>
        <legend>Metadata</legend>
        {entries.map((entry, i) => (
          // A row is its position in the list, as the API's pointers name it (#/metadata/1/value).
          <div class="entry" key={i}>
            <SelectField
              label={`Entry ${i + 1} type`}
              value={entry.type}
              onValue={(type) => setEntry(i, { type })}
              options={METADATA_TYPES.map((t) => [t, t])}
              errors={errorsAt(problem, `#/metadata/${i}/type`)}
            />
            <TextField
              label={`Entry ${i + 1} key`}
              value={entry.key}
              onValue={(key) => setEntry(i, { key })}
              errors={errorsAt(problem, `#/metadata/${i}/key`)}
            />
            <TextField
              label={`Entry ${i + 1} ${entry.type === 'FILE' ? 'file URL' : 'value'}`}
              value={entry.value}
              onValue={(value) => setEntry(i, { value })}
              errors={[
                ...errorsAt(problem, `#/metadata/${i}/value`),
                ...errorsAt(problem, `#/metadata/${i}/file`),
                ...(problem?.errors ?? [])
                  .filter((e) => e.pointer === `#/metadata/${i}`)
                  .map((e) => e.detail),
              ]}
            />
            <button
              type="button"
              class="small"
              aria-label={`Remove entry ${i + 1}`}
              onClick={() => setEntries(entries.filter((_, j) => j !== i))}
            >
              Remove
            </button>
          </div>
        ))}
        <button
          type="button"
          class="small"
          onClick={() => setEntries([...entries, { type: 'TEXT', key: '', value: '' }])}
        >
          Add an entry
        </button>
      </fieldset>
      <button type="submit" class="primary">
        Create registry
      </button>
    </form>
  );
}

export function RegistriesView() {
  const [folder, setFolder] = useState('');
  const pages = usePages();
  const [creating, setCreating] = useState(false);
  const folders = useLoaded(
    () => must(api.GET('/api/v1/folder', { params: { query: { limit: 100 } } })),
    'folders',
  );
  const list = useLoaded(
    () =>
      must(
        api.GET('/api/v1/registry', {
          params: {
            query: {
              limit: 50,
              ...(folder ? { folder_id: folder } : {}),
              ...(pages.cursor ? { cursor: pages.cursor } : {}),
            },
          },
        }),
      ),
    JSON.stringify([folder, pages.cursor]),
  );
  const choose = (name: string) => {
    setFolder(name);
    pages.reset();
  };

  return (
    <section aria-labelledby="registries-heading">
      <div class="heading">
        <h2 id="registries-heading">Registries</h2>
        <button type="button" class="primary" aria-expanded={creating} onClick={() => setCreating(!creating)}>
          {creating ? 'Close the form' : 'New registry'}
        </button>
      </div>
      {creating && (
        <CreateRegistry
          folder={folder}
          onCreated={() => {
            void folders.reload();
            void list.reload();
          }}
        />
      )}
      <div class="split">
        <nav class="folders" aria-label="Folders">
          <h3>Folders</h3>
          <ProblemAlert problem={folders.problem} />
          <ul>
            <li>
              <button type="button" class="link" aria-current={folder === ''} onClick={() => choose('')}>
                All folders
              </button>
            </li>
            {folders.data?.data.map((f) => (
              <li key={f.folder_id}>
                <button
                  type="button"
                  class="link"
                  aria-current={folder === f.folder_id}
                  onClick={() => choose(f.folder_id)}
                >
                  {f.folder_id} <span class="count">{f.registry_count}</span>
                </button>
              </li>
            ))}
          </ul>
        </nav>
        <div>
          <ProblemAlert problem={list.problem} />
          <Table
            caption={folder ? `Registries in ${folder}, newest first` : 'Registries, newest first'}
            columns={['Title', 'Folder', 'Template', 'Created', 'Anchoring']}
            empty={list.data?.data.length === 0 && <>No registries{folder ? ' in this folder' : ' yet'}.</>}
          >
            {list.data?.data.map((r) => (
              <tr key={r.id}>
                <td>
                  <a href={`#/registries/${r.id}`}>{r.title}</a>
                  {r.data_encrypted && <span class="muted"> · encrypted</span>}
                </td>
                <td>{r.folder_id}</td>
                <td>{r.template}</td>
                <td>
                  <Time at={r.created_at} />
                </td>
                <td>
                  <Badge value={anchorState(r)} />
                </td>
              </tr>
            ))}
          </Table>
          <Pager label="Pages of registries" pages={pages} next={list.data?.next_cursor} />
        </div>
      </div>
    </section>
  );
}

/** The receipt of an anchored registry, to read and to save for `ledgerhook verify`. */
function ReceiptView(props: { id: string }) {
  const receipt = useLoaded(
    () => must(api.GET('/api/v1/registry/{id}/proof', { params: { path: { id: props.id } } })),
    props.id,
  );
  if (receipt.problem) return <ProblemAlert problem={receipt.problem} />;
  if (!receipt.data) return <p class="muted">Loading the receipt…</p>;
  const text = JSON.stringify(receipt.data.data, null, 2);
  const save = () => {
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    link.download = `receipt-${props.id}.json`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  };
  return (
    <section aria-labelledby="receipt-heading">
      <h3 id="receipt-heading">Receipt</h3>
      <p>
        Anyone can check it against a node of the chain without this service:{' '}
        <code>ledgerhook verify receipt.json --rpc …</code>
      </p>
      <button type="button" onClick={save}>
        Save receipt.json
      </button>
      <pre class="json">{text}</pre>
    </section>
  );
}

export function RegistryView(props: { id: string }) {
  const { id } = props;
  const registry = useLoaded(() => must(api.GET('/api/v1/registry/{id}', { params: { path: { id } } })), id);
  const r = registry.data?.data;
  return (
    <section aria-labelledby="registry-heading">
      <p class="crumbs">
        <a href="#/registries">Registries</a> /
      </p>
      <h2 id="registry-heading">{r ? r.title : `Registry ${id}`}</h2>
      <ProblemAlert problem={registry.problem} />
      {r && (
        <>
          <dl class="facts">
            <div>
              <dt>Id</dt>
              <dd class="mono">{r.id}</dd>
            </div>
            <div>
              <dt>Folder</dt>
              <dd>{r.folder_id}</dd>
            </div>
            <div>
              <dt>Template</dt>
              <dd>
                {r.template}
                {r.template === 'PASS' && (
                  <>
                    {' · '}
                    <a href={`/pass/${r.id}`} target="_blank" rel="noreferrer">
                      public page
                    </a>
                  </>
                )}
              </dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>
                <Time at={r.created_at} />
              </dd>
            </div>
            <div>
              <dt>Encrypted at rest</dt>
              <dd>{r.data_encrypted ? 'yes' : 'no'}</dd>
            </div>
            {r.callback_url && (
              <div>
                <dt>Callback URL</dt>
                <dd class="mono">{r.callback_url}</dd>
              </div>
            )}
            {r.revoked_at && (
              <div>
                <dt>Revoked</dt>
                <dd>
                  <Time at={r.revoked_at} />
                </dd>
              </div>
            )}
          </dl>
          {r.description && <p class="description">{r.description}</p>}
          <Table
            caption="Metadata"
            columns={['Key', 'Type', 'Title', 'Value']}
            empty={r.metadata.length === 0 && <>No entries.</>}
          >
            {r.metadata.map((m) => (
              <tr key={m.key}>
                <td class="mono">{m.key}</td>
                <td>{m.type}</td>
                <td>{m.title ?? ''}</td>
                <td>
                  <Excerpt text={m.value ?? m.file} max={200} />
                </td>
              </tr>
            ))}
          </Table>
          <section aria-labelledby="anchoring-heading">
            <h3 id="anchoring-heading">Anchoring</h3>
            {r.anchor === null ? (
              <p class="muted">Anchoring is off on this service: the registry is not put on chain.</p>
            ) : (
              <dl class="facts">
                <div>
                  <dt>Status</dt>
                  <dd>
                    <Badge value={r.anchor.status} />
                  </dd>
                </div>
                <div>
                  <dt>Network</dt>
                  <dd>{r.anchor.network ?? '—'}</dd>
                </div>
                <div>
                  <dt>Transaction</dt>
                  <dd class="mono">{r.anchor.txId ?? 'not yet'}</dd>
                </div>
                <div>
                  <dt>Block</dt>
                  <dd>{r.anchor.blockNumber ?? '—'}</dd>
                </div>
                <div>
                  <dt>Merkle root</dt>
                  <dd class="mono">{r.anchor.root ?? '—'}</dd>
                </div>
                <div>
                  <dt>Anchored</dt>
                  <dd>
                    <Time at={r.anchor.anchored_at} />
                  </dd>
                </div>
              </dl>
            )}
            {r.anchor?.status === 'pending' && (
              <button type="button" onClick={() => void registry.reload()}>
                Check again
              </button>
            )}
          </section>
          {r.anchor?.status === 'anchored' && <ReceiptView id={r.id} />}
        </>
      )}
    </section>
  );
}
