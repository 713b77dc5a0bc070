// The admin-action audit interface: who did what to which resource, with before/after already masked; the audit module backs it with its durable writer.

export interface AdminAuditEvent {
  request_id: string;
  /** The acting admin; null for failed sign-ins where nobody is authenticated. */
  admin_user_id: number | null;
  /** e.g. "identity.create", "auth.login_failed", "grant.delete". */
  action: string;
  target?: { type: string; id: string | number } | undefined;
  /** Before/after values with every secret masked (use the audit module's sanitizer). */
  changes?: { before?: unknown; after?: unknown } | undefined;
  outcome: 'success' | 'denied' | 'failure';
  status: number;
  client_ip: string | null;
  details?: Record<string, unknown> | undefined;
}

export interface AdminAuditor {
  record(event: AdminAuditEvent): Promise<void>;
}
