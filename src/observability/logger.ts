// The process logger: pino JSON lines on stdout with credential redaction applied to every record.
import { pino, type Logger, type LoggerOptions } from 'pino';

/** Paths whose values are credentials wherever they appear in a log record. */
export const REDACT_PATHS = [
  'password', '*.password', 'new_password', '*.new_password', 'current_password', '*.current_password', 'confirm_password', '*.confirm_password',
  'api_key', '*.api_key', 'token', '*.token', 'secret', '*.secret', 'pg_password', '*.pg_password',
  'authorization', '*.authorization', 'cookie', '*.cookie',
  'req.headers.authorization', 'req.headers.cookie', 'req.headers["x-csrf-token"]', 'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]', 'headers.authorization', 'headers.cookie',
  'connection_config.password', 'connection_config.token', 'connection_config.auth_header', '*.connection_config.password', '*.connection_config.token',
];

export type { Logger };

export function createLogger(opts: { level: string; service: string; role: string; destination?: pino.DestinationStream }): Logger {
  const options: LoggerOptions = {
    level: opts.level,
    base: { service: opts.service, role: opts.role, pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
