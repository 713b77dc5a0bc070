// Public surface of the personal-data scanner (docs/governance/pii.md): detectors, modes, markers and the scanner factory.
export { createPiiScanner, piiOptionsFromConfig } from './scanner.js';
export type {
  JsonScanResult, PiiConfigSection, PiiMode, PiiScanner, PiiScannerOptions, PiiScanOptions, RowScanResult, TextScanResult,
} from './scanner.js';
export { CONTEXT_DETECTORS, FAST_DETECTORS } from './detectors.js';
export type { DetectorGate, PiiDetector, PiiMatch } from './detectors.js';
export { marker, SCAN_FAILED, COLUMN } from './text.js';
export { keyContextType, normalizeKey } from './keys.js';
export { cardNetwork, ibanValid, ipv4Valid, ipv6Valid, luhnValid, ssnValid } from './checks.js';
export { bodyKind, parseMediaType, scanBody } from './body.js';
export type { BodyKind, BodyScanResult, MediaType } from './body.js';
