// The console's left navigation: one entry per page, shown only to admins whose roles grant its permission (docs/console.md says how to add one).
import type { Permission } from '../auth/permissions.js';

export interface NavEntry {
  /** Link target; also the prefix that marks the entry current (aria-current) for the pages below it. */
  href: string;
  label: string;
  /** The permission the page itself checks; admins without it do not see the entry. */
  permission: Permission | null;
  /** Position in the menu: lower first. */
  order: number;
}

/** Add a page's entry here (one line each keeps parallel edits mergeable). */
export const navEntries: NavEntry[] = [
  { href: '/dashboard/overview', label: 'Overview', permission: null, order: 10 },
  { href: '/dashboard/approvals', label: 'Approvals', permission: 'approvals:read', order: 20 },
  { href: '/dashboard/audit', label: 'Audit', permission: 'audit:read', order: 30 },
  { href: '/dashboard/access-control/identities', label: 'Identities', permission: 'identities:read', order: 40 },
  { href: '/dashboard/alerts', label: 'Alerts', permission: 'alerts:read', order: 60 },
  { href: '/dashboard/data-sources', label: 'Data sources', permission: 'sources:read', order: 50 },
  { href: '/dashboard/policies', label: 'Policies', permission: 'policies:read', order: 55 },
  { href: '/dashboard/ingestion/jobs', label: 'Ingestion', permission: 'jobs:read', order: 70 },
  { href: '/dashboard/catalog/naming-report', label: 'Naming report', permission: 'catalog:read', order: 55 },
  { href: '/dashboard/admins', label: 'Admins', permission: 'admins:read', order: 90 },
  { href: '/dashboard/account', label: 'Account', permission: null, order: 95 },
];

/** The entries an admin may see, in menu order. */
export function visibleNav(can: (p: Permission) => boolean): NavEntry[] {
  return navEntries.filter((e) => e.permission === null || can(e.permission)).sort((a, b) => a.order - b.order);
}

/** The entry a path belongs to: the longest href that is the path or a prefix of it at a segment boundary. */
export function currentEntry(path: string): NavEntry | undefined {
  let best: NavEntry | undefined;
  for (const e of navEntries) {
    if ((path === e.href || path.startsWith(`${e.href}/`)) && (!best || e.href.length > best.href.length)) best = e;
  }
  return best;
}
