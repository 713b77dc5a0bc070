// Suggested classifications (pure): a column's or property's name and type read with the personal-data detectors' key vocabulary (governance/pii/keys.ts), so a suggestion and a deep-mode scan agree.
import { keyContextType, normalizeKey } from '../governance/pii/index.js';

/** Types that hold personal data whatever the column is called. */
const TYPE_TAGS: ReadonlyArray<readonly [RegExp, string]> = [[/^(inet|cidr)(\[\])?$/, 'ip_address']];

/** The tag the name (or, failing that, the type) suggests, or null. Tags are the detectors' names: email, phone, ssn, card, iban, name, address, dob, … */
export function suggestClassification(name: string, type: string | null = null): string | null {
  const byName = keyContextType(normalizeKey(name));
  if (byName !== null) return byName;
  if (type !== null) for (const [re, tag] of TYPE_TAGS) if (re.test(type)) return tag;
  return null;
}

/** What an operator may write as a classification: a short tag of lower-case letters, digits, `_` and `-`. */
export const CLASSIFICATION_PATTERN = /^[a-z0-9][a-z0-9_-]{0,127}$/;
