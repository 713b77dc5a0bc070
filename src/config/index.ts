// The configuration module's public face: load once at start, freeze, inject.
export { loadConfig, getPath, ENV_PREFIX, CONFIG_PATH_ENV, type LoadedConfig, type ConfigFailure, type LoadOptions } from './load.js';
export { maskedConfig } from './mask.js';
export { Secrets, maskUrlCredentials, isSecretRef, resolveSecretRef } from './secrets.js';
export { configSchema, serviceRoles, secretRefPaths, type Config, type ServiceRole, type SecretRefPath } from './schema.js';
