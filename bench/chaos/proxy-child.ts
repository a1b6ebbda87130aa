// A TCP proxy on loopback, run as its own process: the chaos run's stand-in for a virtual IP (as
// HAProxy or a cloud endpoint would be) in front of PostgreSQL, and the replication link between
// the clusters. Its own process, so the service's database traffic never waits on the event loop
// of the process that generates the load and checks the results.
//
// argv: <target port>
// IPC in:  { seq, cmd: 'target', port }  forward new connections to `port`, close every existing one
//          { seq, cmd: 'cut' }           close every connection, reset new ones (a link that is down)
//          { seq, cmd: 'restore' }       forward again
// IPC out: { ev: 'listening', port } once, then { seq, ev: 'ok', closed } per command
import net from 'node:net';

let target = Number(process.argv[2]);
let cut = false;
const links = new Set<[net.Socket, net.Socket]>();

function closeAll(): number {
  const count = links.size;
  for (const [a, b] of links) {
    a.destroy();
    b.destroy();
  }
  links.clear();
  return count;
}

const server = net.createServer((client) => {
  if (cut) {
    client.resetAndDestroy();
    return;
  }
  client.setNoDelay(true);
  const upstream = net.connect(target, '127.0.0.1');
  upstream.setNoDelay(true);
  const link: [net.Socket, net.Socket] = [client, upstream];
  links.add(link);
  const drop = () => {
    links.delete(link);
    client.destroy();
    upstream.destroy();
  };
  client.on('error', drop);
  upstream.on('error', drop);
  client.on('close', drop);
  upstream.on('close', drop);
  client.pipe(upstream);
  upstream.pipe(client);
});

process.on('message', (message: { seq: number; cmd: string; port?: number }) => {
  let closed = 0;
  if (message.cmd === 'target') {
    target = message.port!;
    closed = closeAll();
  } else if (message.cmd === 'cut') {
    cut = true;
    closed = closeAll();
  } else if (message.cmd === 'restore') {
    cut = false;
  }
  process.send?.({ seq: message.seq, ev: 'ok', closed });
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.send?.({ ev: 'listening', port: (server.address() as net.AddressInfo).port });
});
