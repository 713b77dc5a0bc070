// Starting a role: builds the services, binds each listener with a clear error naming the config key when a port is taken, and shuts down gracefully on SIGTERM/SIGINT.
import type net from 'node:net';
import type { FastifyInstance, FastifyListenOptions } from 'fastify';
import type { LoadedConfig, ServiceRole } from '../config/index.js';
import type { Logger } from '../observability/logger.js';
import { buildServices, type Services } from './services.js';
import { buildGatewayApp } from '../gateway/app.js';
import { reloadHttpTls } from '../http/server.js';
import { buildAdminApp } from '../admin/app.js';
import { buildWireListener } from '../gateway/pgwire/index.js';
import { Worker } from '../worker/worker.js';
import { attachIngestion } from '../worker/ingestion.js';
import { auditPartitionsTask } from '../audit/maintenance-task.js';
import { approvalSweepTask } from '../approvals/runtime.js';
import { alertEvaluationTask } from '../alerts/runtime.js';
import { catalogWorkerTask } from '../catalog/runtime.js';
import { GatewayReplicas, isReplica } from './gateway-replicas.js';
import { startOidcProvider } from '../oidc/index.js';
import { applyWorkerHeapFlags } from './v8-flags.js';

export class ListenError extends Error {
  readonly code = 'listen_failed';
}

export interface RunningService {
  services: Services;
  /** Addresses actually bound, by config key (useful with port 0 in tests). */
  addresses: Record<string, { host: string; port: number }>;
  /** The extra gateway processes this process runs (gateway.processes > 1), null otherwise. */
  replicas: GatewayReplicas | null;
  shutdown(reason: string): Promise<void>;
  /**
   * SIGHUP: re-reads each TLS listener's certificate, key and client CA (gateway.tls, admin.tls, gateway.pg_tls)
   * and uses them for new connections; open connections are not dropped. A section whose files cannot be used
   * keeps its old context and is reported in `failed` (docs/tls.md).
   */
  reloadTls(): { reloaded: string[]; failed: Array<{ key: string; error: string }> };
}

interface Listener {
  key: string;
  close(): Promise<void>;
}

const envName = (key: string) => `SERVICE_${key.toUpperCase().replace('.', '__')}`;

function listenFailure(err: unknown, key: string, host: string, port: number): ListenError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') {
    return new ListenError(`${key}: port ${port} on ${host} is already in use; choose another port with ${key} (environment ${envName(key)})`);
  }
  if (code === 'EACCES') return new ListenError(`${key}: not permitted to listen on ${host}:${port}; choose a port above 1023 with ${key}`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return new ListenError(`${key.replace(/port$/, 'host')}: ${host} is not an address of this machine`);
  return new ListenError(`${key}: cannot listen on ${host}:${port} (${code ?? 'unknown error'})`);
}

async function listenFastify(app: FastifyInstance, key: string, host: string, port: number, reusePort = false): Promise<{ host: string; port: number }> {
  try {
    // Fastify hands these options to net.Server#listen, which knows reusePort; Fastify's types do not list it.
    const options: FastifyListenOptions & { reusePort: boolean } = { host, port, reusePort, listenTextResolver: (address) => `${key}: listening at ${address}` };
    await app.listen(options);
  } catch (err) {
    throw listenFailure(err, key, host, port);
  }
  const addr = app.server.address() as net.AddressInfo;
  return { host: addr.address, port: addr.port };
}

async function listenNet(server: net.Server, key: string, host: string, port: number, reusePort = false): Promise<{ host: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(listenFailure(err, key, host, port));
    server.once('error', onError);
    server.listen({ host, port, reusePort }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address() as net.AddressInfo;
  return { host: addr.address, port: addr.port };
}

export async function startService(loaded: LoadedConfig, role: ServiceRole, log: Logger): Promise<RunningService> {
  const { config } = loaded;
  if (role === 'worker') applyWorkerHeapFlags();
  const services = await buildServices(loaded, role, log);
  const listeners: Listener[] = [];
  const tlsReloads: Array<{ key: string; reload(): boolean }> = [];
  const addresses: RunningService['addresses'] = {};
  let worker: Worker | null = null;
  let replicas: GatewayReplicas | null = null;
  // Every gateway process of this host binds the same ports; the kernel spreads connections across them.
  const sharedListeners = config.gateway.processes > 1;

  try {
    // Discovery before any listener: front doors and the admin login read the provider (spec §5.6).
    if (role === 'all' || role === 'gateway' || role === 'admin') await startOidcProvider(services);
    if (role === 'all' || role === 'gateway') {
      const gateway = await buildGatewayApp(services);
      addresses['gateway.http_port'] = await listenFastify(gateway, 'gateway.http_port', config.gateway.host, config.gateway.http_port, sharedListeners);
      listeners.push({ key: 'gateway.http_port', close: () => gateway.close() });
      tlsReloads.push({ key: 'gateway.tls', reload: () => reloadHttpTls(gateway) });
      if (config.gateway.pg_enabled) {
        const wire = await buildWireListener(services);
        const host = config.gateway.pg_host ?? config.gateway.host;
        addresses['gateway.pg_port'] = await listenNet(wire.server, 'gateway.pg_port', host, config.gateway.pg_port, sharedListeners);
        const timeouts = config.gateway.timeouts;
        const drainMs = timeouts.pg_drain_ms ?? Math.floor(timeouts.shutdown_grace_ms / 2);
        listeners.push({ key: 'gateway.pg_port', close: () => wire.close(drainMs) });
        tlsReloads.push({ key: 'gateway.pg_tls', reload: () => wire.reloadTls() });
      }
    }
    if (role === 'all' || role === 'admin') {
      const admin = await buildAdminApp(services);
      addresses['admin.port'] = await listenFastify(admin, 'admin.port', config.admin.host, config.admin.port);
      listeners.push({ key: 'admin.port', close: () => admin.close() });
      tlsReloads.push({ key: 'admin.tls', reload: () => reloadHttpTls(admin) });
    }
    if (role === 'all' || role === 'worker') {
      worker = new Worker(services);
      worker.addTask(auditPartitionsTask(services));
      worker.addTask(approvalSweepTask(services));
      worker.addTask(alertEvaluationTask(services, worker.workerId));
      worker.addTask(catalogWorkerTask(services, worker.workerId));
      attachIngestion(worker, services);
      await worker.start();
    }
    if (sharedListeners && (role === 'all' || role === 'gateway') && !isReplica()) {
      // Replicas bind the ports this process actually got (the configuration may say 0).
      const ports: Record<string, number> = { SERVICE_GATEWAY__HTTP_PORT: addresses['gateway.http_port']!.port };
      if (addresses['gateway.pg_port']) ports.SERVICE_GATEWAY__PG_PORT = addresses['gateway.pg_port'].port;
      replicas = await GatewayReplicas.start({ count: config.gateway.processes - 1, origin: loaded.origin, ports, spoolDir: config.audit.spool.dir, log, graceMs: config.gateway.timeouts.shutdown_grace_ms });
    }
  } catch (err) {
    await replicas?.stop();
    for (const l of listeners.reverse()) await l.close().catch(() => undefined);
    await worker?.stop();
    await services.close();
    throw err;
  }

  let shuttingDown: Promise<void> | null = null;
  const shutdown = (reason: string): Promise<void> => {
    shuttingDown ??= (async () => {
      log.info({ reason }, 'shutting down: draining listeners');
      services.readiness.startDraining();
      // Listeners first (stop accepting, finish in-flight requests), then the worker, then stores flush and close.
      await Promise.allSettled([...listeners.map((l) => l.close()), replicas?.stop()]);
      await worker?.stop();
      await services.close();
      log.info('shutdown complete');
    })();
    return shuttingDown;
  };

  const reloadTls: RunningService['reloadTls'] = () => {
    const reloaded: string[] = [];
    const failed: Array<{ key: string; error: string }> = [];
    for (const r of tlsReloads) {
      try {
        if (r.reload()) reloaded.push(r.key);
      } catch (err) {
        // TlsConfigError names the key and file; other errors (OpenSSL's) carry no secret material either.
        failed.push({ key: r.key, error: err instanceof Error ? err.message : String(err) });
      }
    }
    replicas?.signal('SIGHUP');
    if (failed.length > 0) log.error({ reloaded, failed }, 'TLS reload: some listeners keep their previous certificate');
    else log.info({ reloaded }, 'TLS certificates reloaded');
    return { reloaded, failed };
  };

  log.info(
    {
      role,
      environment: config.environment,
      config_file: loaded.file ?? 'none (defaults and environment)',
      store: services.store.kind,
      coordination: services.coord.kind,
      listeners: Object.fromEntries(Object.entries(addresses).map(([k, a]) => [k, `${a.host}:${a.port}`])),
      ...(replicas ? { gateway_replicas: replicas.pids() } : {}),
    },
    isReplica() ? 'gateway replica started' : 'gatehouse started',
  );
  return { services, addresses, replicas, shutdown, reloadTls };
}
