// A source's connection config parsed once per configuration object and shared, frozen: the hot paths read it per request or statement.
import { deepFreeze } from '../util/freeze.js';

/** What a zod schema's safeParse answers, as far as this module needs it. */
interface SafeParser<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false };
}

/**
 * A reader of `schema`'s view of a source's `connection_config`, or null when the config does not parse. The source
 * registry makes a new config object on every change, so a changed source is parsed anew; the result is frozen
 * because every caller shares it (docs/decisions/0029, TPC-B addendum: five places parsed it per statement).
 */
export function parsedConfigReader<T>(schema: SafeParser<T>): (source: { readonly connection_config: object }) => T | null {
  const parsed = new WeakMap<object, T | null>();
  return (source) => {
    const raw = source.connection_config;
    let config = parsed.get(raw);
    if (config === undefined) {
      const result = schema.safeParse(raw);
      config = result.success ? deepFreeze(result.data) : null;
      parsed.set(raw, config);
    }
    return config;
  };
}
