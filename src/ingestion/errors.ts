// Why an ingestion job failed: a typed code, whether a retry can help, and a message safe to store in error_message (docs/ingestion.md "Failures").

export const INGESTION_ERRORS = {
  path_escape: { retryable: false, text: 'the path leaves the source root' },
  root_not_allowed: { retryable: false, text: 'the source root is not inside ingestion.files_roots' },
  not_found: { retryable: false, text: 'the file does not exist' },
  not_a_file: { retryable: false, text: 'the path is not a regular file' },
  document_too_large: { retryable: false, text: 'the document is larger than ingestion.max_document_bytes' },
  unsupported_type: { retryable: false, text: 'the content type is not one ingestion can extract' },
  corrupt_document: { retryable: false, text: 'the document cannot be parsed' },
  decompression_bomb: { retryable: false, text: 'the document decompresses past ingestion.max_decompressed_bytes' },
  source_unusable: { retryable: false, text: 'the source cannot be ingested' },
  egress_denied: { retryable: false, text: 'the upstream address is not allowed by the egress rules' },
  upstream_status: { retryable: true, text: 'the upstream answered an error status' },
  upstream_failed: { retryable: true, text: 'the upstream request failed' },
  timed_out: { retryable: false, text: 'the job ran longer than ingestion.job_timeout_seconds' },
  internal: { retryable: true, text: 'an internal error stopped the job' },
} as const;

export type IngestionErrorCode = keyof typeof INGESTION_ERRORS;

export class IngestionError extends Error {
  readonly code: IngestionErrorCode;
  readonly retryable: boolean;

  /** `detail` is appended to the stored message: it must never carry a credential or an internal address. */
  constructor(code: IngestionErrorCode, detail?: string, opts: { cause?: unknown; retryable?: boolean } = {}) {
    super(`${code}: ${INGESTION_ERRORS[code].text}${detail ? ` (${detail})` : ''}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'IngestionError';
    this.code = code;
    this.retryable = opts.retryable ?? INGESTION_ERRORS[code].retryable;
  }
}
