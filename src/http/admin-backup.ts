import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { createBackupArchive } from '../store/backup.js';
import type { Store } from '../store/db.js';

/** The admin endpoint's route that `ledgerhook backup` calls while the service runs. */
export const BACKUP_ROUTE = '/admin/backup';

/**
 * `GET /admin/backup` on the admin endpoint: a consistent snapshot of the running embedded
 * database (store/backup.ts), the manifest line first, streamed to the CLI, which checks it and
 * writes the file. Taking it through the process that holds the database is what makes it
 * consistent: copying the files under a running PGlite is not.
 */
export function backupRoute(store: Store): (admin: FastifyInstance) => void {
  return (admin) => {
    admin.get(BACKUP_ROUTE, async (_request, reply) => {
      const { header, tarball } = await createBackupArchive(store);
      return reply
        .type('application/octet-stream')
        .header('content-length', header.length + tarball.length)
        .send(
          Readable.from([header, Buffer.from(tarball.buffer, tarball.byteOffset, tarball.length)], {
            objectMode: false,
          }),
        );
    });
  };
}
