// The `gatehouse` CLI: start [--role R], migrate, config check, admin reset-password, audit verify. Exit codes: 0 ok, 1 runtime failure, 2 configuration problem, 3 audit verification found a break, 64 usage error.
import './runtime/v8-flags.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { stringify } from 'yaml';
import { loadConfig, maskedConfig, serviceRoles, type LoadedConfig, type ServiceRole } from './config/index.js';
import { createLogger, type Logger } from './observability/logger.js';

// The runtime (fastify, pg, PGlite, …) is imported by the commands that run it, so `config check` stays fast and
// independent of everything but the configuration module.
const runtime = () => import('./runtime/services.js');

const EXIT_RUNTIME = 1;
const EXIT_CONFIG = 2;
const EXIT_USAGE = 64;
/** `audit verify` found an edited, inserted or deleted row or a broken seal chain. */
const EXIT_TAMPERED = 3;

const USAGE = `Usage: gatehouse <command>

Commands:
  start [--role all|gateway|admin|worker|migration]   run the service (role defaults to service_role)
  migrate                                             apply pending control-store migrations and exit
  config check                                        validate the configuration and print it with secrets masked
  admin reset-password <username>                     set an admin's password, read from standard input (one line)
  audit verify --from <ISO-8601> --to <ISO-8601>      check the audit log's seal chains over [from, to); exit 3 on a break

Configuration: defaults, then YAML from SERVICE_CONFIG_PATH (else ./config.yaml or ./config.yml),
then SERVICE_* environment variables (double underscore nests: SERVICE_GATEWAY__HTTP_PORT).
See docs/configuration.md.`;

/** Writes to stderr without the console: the CLI's own messages are not log records. */
function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

function loadOrExit(): LoadedConfig {
  const result = loadConfig();
  if (!result.ok) {
    say(`gatehouse: the configuration has ${result.problems.length} problem${result.problems.length === 1 ? '' : 's'}:`);
    for (const p of result.problems) say(`  ${p}`);
    process.exit(EXIT_CONFIG);
  }
  return result;
}

/** The configuration `npm start` reads when no other file is set (package.json "start"). */
const NPM_START_CONFIG = path.join('config', 'development.yaml');

/**
 * The CLI reads only what spec §9 names (SERVICE_CONFIG_PATH, else ./config.yaml / ./config.yml); `npm start` adds
 * config/development.yaml. When that is the difference in this directory, say so before anything else.
 */
function configFileNote(loaded: LoadedConfig, command: string): string | null {
  if (loaded.file !== null || !existsSync(path.join(loaded.origin.cwd, NPM_START_CONFIG))) return null;
  return (
    `no configuration file was read (SERVICE_CONFIG_PATH is unset, no ./config.yaml): built-in defaults and environment only, ` +
    `not ${NPM_START_CONFIG}, which \`npm start\` uses (ports, audit mode and more differ). ` +
    `The same configuration as npm start: SERVICE_CONFIG_PATH=${NPM_START_CONFIG} npx gatehouse ${command}`
  );
}

function loggerFor(loaded: LoadedConfig, role: string): Logger {
  return createLogger({ level: loaded.config.observability.log_level, service: loaded.config.observability.service_name, role });
}

async function runMigrations(loaded: LoadedConfig, log: Logger): Promise<void> {
  const { openStore } = await runtime();
  const { migrateToLatest } = await import('./store/migrate.js');
  const store = await openStore(loaded.config, log, { direct: true });
  try {
    const { applied } = await migrateToLatest(store.db);
    log.info({ applied }, applied.length > 0 ? 'migrations applied' : 'migrations already at head');
  } finally {
    await store.close();
  }
}

async function start(roleArg: string | undefined): Promise<void> {
  if (roleArg !== undefined && !(serviceRoles as readonly string[]).includes(roleArg)) {
    say(`gatehouse: --role must be one of ${serviceRoles.join(', ')}`);
    process.exit(EXIT_USAGE);
  }
  const loaded = loadOrExit();
  const role = (roleArg ?? loaded.config.service_role) as ServiceRole;
  const log = loggerFor(loaded, role);
  for (const w of loaded.warnings) log.warn(w);
  const note = configFileNote(loaded, 'start');
  if (note !== null) {
    say(`gatehouse: ${note}`);
    log.warn({ config_file: null, npm_start_config: NPM_START_CONFIG }, note);
  }

  if (role === 'migration') {
    await runMigrations(loaded, log);
    return;
  }

  const { startService } = await import('./runtime/start.js');
  const { isReplica, announceReplica } = await import('./runtime/gateway-replicas.js');
  const running = await startService(loaded, role, log);
  const graceMs = loaded.config.gateway.timeouts.shutdown_grace_ms;
  const onSignal = (signal: NodeJS.Signals) => {
    const force = setTimeout(() => {
      log.error({ grace_ms: graceMs }, 'shutdown did not finish within the grace period; exiting');
      process.exit(EXIT_RUNTIME);
    }, graceMs);
    force.unref();
    running.shutdown(signal).then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(EXIT_RUNTIME);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  // SIGHUP: new certificates from the same files, for new connections; nothing else is reloaded (docs/tls.md).
  process.on('SIGHUP', () => void running.reloadTls());
  if (isReplica()) announceReplica(() => onSignal('SIGTERM'));
}

function configCheck(): void {
  const loaded = loadOrExit();
  for (const w of loaded.warnings) say(`warning: ${w}`);
  const note = configFileNote(loaded, 'config check');
  if (note !== null) say(`gatehouse: ${note}`);
  process.stdout.write(`# effective configuration${loaded.file ? ` (file: ${loaded.file})` : ' (no file; defaults and environment)'}; secrets masked\n`);
  if (note !== null) process.stdout.write(`# NOTE: ${note}\n`);
  process.stdout.write(stringify(maskedConfig(loaded.config)));
}

async function readStdinLine(maxBytes: number): Promise<string> {
  let data = '';
  for await (const chunk of process.stdin) {
    data += (chunk as Buffer).toString('utf8');
    if (data.length > maxBytes) break;
    if (data.includes('\n')) break;
  }
  return data.split(/\r?\n/)[0] ?? '';
}

/** The password comes from standard input, never from argv, so it stays out of process lists and shell history. */
async function resetPassword(username: string | undefined): Promise<void> {
  if (!username) {
    say('gatehouse: admin reset-password needs a username');
    process.exit(EXIT_USAGE);
  }
  const loaded = loadOrExit();
  const log = loggerFor(loaded, 'cli');
  if (process.stdin.isTTY) say(`New password for ${username} (one line):`);
  const password = await readStdinLine(4096);
  const { openStore } = await runtime();
  const { resetAdminPassword } = await import('./admin/auth/bootstrap.js');
  const store = await openStore(loaded.config, log);
  try {
    await resetAdminPassword(store.db, username, password);
    say(`gatehouse: password of ${username} reset; its sessions are ended`);
  } catch (err) {
    if (err instanceof TypeError) {
      say(`gatehouse: ${err.message}`);
      process.exitCode = EXIT_USAGE;
      return;
    }
    throw err;
  } finally {
    await store.close();
  }
}

/** Checks the seal chains over [from, to) and prints the report (JSON) on stdout; exit 3 when a break was found. */
async function auditVerify(fromArg: string | undefined, toArg: string | undefined): Promise<void> {
  const from = fromArg === undefined ? Number.NaN : Date.parse(fromArg);
  const to = toArg === undefined ? Number.NaN : Date.parse(toArg);
  if (Number.isNaN(from) || Number.isNaN(to) || from >= to) {
    say('gatehouse: audit verify needs --from and --to, ISO-8601 timestamps with from before to');
    process.exit(EXIT_USAGE);
  }
  const loaded = loadOrExit();
  const log = loggerFor(loaded, 'cli');
  const { openStore } = await runtime();
  const { verifyAudit } = await import('./audit/verify.js');
  const { SEAL_TIME_ORDER_INDEX, hasSealTimeOrder } = await import('./audit/partitions.js');
  const store = await openStore(loaded.config, log);
  try {
    if (!(await hasSealTimeOrder(store.db))) {
      // Without it every page of seals reads the seals table from the range's start (docs/decisions/0034).
      say(`gatehouse: index ${SEAL_TIME_ORDER_INDEX} is missing (partition maintenance builds it on a large seals table); verify reads seals without it, far slower`);
    }
    const report = await verifyAudit(store.db, { from: new Date(from), to: new Date(to) });
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    say(
      report.ok
        ? `gatehouse: audit log intact over [${report.from}, ${report.to}): ${report.rows_checked} rows, ${report.seals_checked} seals, ${report.chains} chains`
        : `gatehouse: audit log NOT intact over [${report.from}, ${report.to}): ${report.problems.length} problem(s), first: ${JSON.stringify(report.problems[0])}`,
    );
    if (!report.ok) process.exitCode = EXIT_TAMPERED;
  } finally {
    await store.close();
  }
}

function version(): string {
  const require = createRequire(import.meta.url);
  return (require('../package.json') as { version: string }).version;
}

async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { role: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
    });
  } catch (err) {
    say(`gatehouse: ${(err as Error).message}`);
    say(USAGE);
    process.exit(EXIT_USAGE);
  }
  const { values, positionals } = parsed;
  if (values.version) return void process.stdout.write(`${version()}\n`);
  const command = positionals.join(' ');
  if (values.help || command === '' || command === 'help') return void process.stdout.write(`${USAGE}\n`);
  if (values.role !== undefined && command !== 'start') {
    say('gatehouse: --role applies to start only');
    process.exit(EXIT_USAGE);
  }
  if ((values.from !== undefined || values.to !== undefined) && command !== 'audit verify') {
    say('gatehouse: --from and --to apply to audit verify only');
    process.exit(EXIT_USAGE);
  }
  switch (command) {
    case 'start':
      return start(values.role);
    case 'migrate': {
      const loaded = loadOrExit();
      const note = configFileNote(loaded, 'migrate');
      if (note !== null) say(`gatehouse: ${note}`);
      return runMigrations(loaded, loggerFor(loaded, 'migration'));
    }
    case 'config check':
      return configCheck();
    case 'audit verify':
      return auditVerify(values.from, values.to);
    default:
      if (positionals[0] === 'admin' && positionals[1] === 'reset-password' && positionals.length <= 3) return resetPassword(positionals[2]);
      say(`gatehouse: unknown command "${command}"`);
      say(USAGE);
      process.exit(EXIT_USAGE);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // Deliberate errors (a taken port, an unreachable store) carry safe messages; anything else is reported by class.
  const e = err as { code?: string; message?: string; name?: string };
  const safe = e.code !== undefined && typeof e.message === 'string' ? e.message : `${e.name ?? 'Error'}: start-up failed`;
  say(`gatehouse: ${safe}`);
  process.exit(EXIT_RUNTIME);
});
