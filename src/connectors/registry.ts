// The connector registry: every connector a source can be registered on, looked up by key; the composition root owns the instance.
import type { Connector } from './types.js';
import { postgresConnector } from './postgres.js';
import { httpConnector } from './http.js';
import { filesConnector } from './files.js';

export type { Connector, ConnectorCapability, ConnectionTestResult, ConnectionTestContext, CredentialField, SecretResolver } from './types.js';
export { maskSourceConfig, carryMaskedCredentials, credentialMode, secretResolver, resolveCredential, isValidSecretRef, type CredentialMode } from './credentials.js';

export class ConnectorRegistry {
  readonly #byKey = new Map<string, Connector>();

  constructor(connectors: readonly Connector[]) {
    for (const c of connectors) {
      if (this.#byKey.has(c.key)) throw new TypeError(`connector ${c.key} registered twice`);
      this.#byKey.set(c.key, c);
    }
  }

  get(key: string): Connector | undefined {
    return this.#byKey.get(key);
  }

  list(): Connector[] {
    return [...this.#byKey.values()];
  }

  keys(): string[] {
    return [...this.#byKey.keys()];
  }

  /** The connector of a source: its connector_key when set, else the one named like its source_type. */
  forSource(source: { source_type: string; connector_key?: string | null }): Connector | undefined {
    return this.get(source.connector_key ?? source.source_type);
  }
}

/** The connectors this build ships. */
export function defaultConnectors(): ConnectorRegistry {
  return new ConnectorRegistry([postgresConnector, httpConnector, filesConnector]);
}
