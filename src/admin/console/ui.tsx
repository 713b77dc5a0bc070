// Small shared pieces of console pages: times, state badges, one-button POST forms, secrets shown once, empty states, id parsing.
import type { PageContext } from './context.js';
import { CsrfField, Hidden } from './layout.js';
import { GatehouseError } from '../../errors/registry.js';

/** A timestamp as `YYYY-MM-DD HH:MM:SS UTC` inside <time datetime>. */
export function Time({ value }: { value: Date | string | null | undefined }): JSX.Element {
  if (value === null || value === undefined) return <span class="muted">—</span>;
  const d = typeof value === 'string' ? new Date(value) : value;
  if (Number.isNaN(d.getTime())) return <span class="muted">—</span>;
  const iso = d.toISOString();
  return (
    <time datetime={iso} safe>
      {iso.slice(0, 19).replace('T', ' ')} UTC
    </time>
  );
}

export function EnabledBadge({ enabled }: { enabled: boolean }): JSX.Element {
  return enabled ? <span class="badge ok">enabled</span> : <span class="badge bad">disabled</span>;
}

/** A form that is one button (plus hidden fields), with the CSRF token: approve, disable, revoke, … */
export function PostButton(props: { ctx: PageContext; action: string; label: string; fields?: Record<string, string>; variant?: 'danger' | 'secondary' }): JSX.Element {
  return (
    <form method="post" action={props.action} class="inline-form">
      <CsrfField ctx={props.ctx} />
      {Object.entries(props.fields ?? {}).map(([name, value]) => (
        <Hidden name={name} value={value} />
      ))}
      <button type="submit" class={props.variant ? `button small ${props.variant}` : 'button small'} safe>
        {props.label}
      </button>
    </form>
  );
}

export function Empty({ children }: { children: JSX.Element | string }): JSX.Element {
  return <p class="notice">{children}</p>;
}

/** A positive integer path id, or a 404 (a page address that names nothing). */
export function pageId(raw: unknown): number {
  const s = typeof raw === 'string' ? raw : '';
  if (!/^[1-9][0-9]{0,9}$/.test(s) || Number(s) > 2_147_483_647) throw new GatehouseError('not_found', 'There is no such record.');
  return Number(s);
}

/** Splits a comma- or newline-separated form field into trimmed, non-empty entries. */
export function splitList(value: string): string[] {
  return value
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** A URL path segment from a value (ids and source ids in links). */
export function seg(value: string | number): string {
  return encodeURIComponent(String(value));
}

/** A secret shown this once (a generated agent key, an admin API token): Gatehouse keeps only a digest. */
export function ShownOnce({ title, secret, what }: { title: string; secret: string; what: string }): JSX.Element {
  return (
    <div class="panel">
      <p class="success" role="status" safe>
        {title}
      </p>
      <p>
        <span safe>{what}</span> is shown <strong>this once</strong>; Gatehouse keeps only a digest. Copy it now.
      </p>
      <p class="secret" id="new-key" safe>
        {secret}
      </p>
      <button type="button" class="button secondary small" data-copy-target="new-key" hidden>
        Copy
      </button>
    </div>
  );
}
