// The admin permission matrix: which admin role may do what (docs/admin-roles.md mirrors this table).

export const adminRoles = ['owner', 'admin', 'approver', 'auditor', 'viewer'] as const;
export type AdminRole = (typeof adminRoles)[number];

export const permissions = [
  'identities:read',
  'identities:write',
  'sources:read',
  'sources:write',
  'policies:read',
  'policies:write',
  'approvals:read',
  'approvals:decide',
  'audit:read',
  'jobs:read',
  'jobs:write',
  'catalog:read',
  'catalog:write',
  'alerts:read',
  'alerts:write',
  'admins:read',
  'admins:manage',
] as const;
export type Permission = (typeof permissions)[number];

const READ: Permission[] = permissions.filter((p) => p.endsWith(':read') && p !== 'audit:read' && p !== 'admins:read');

export const rolePermissions: Readonly<Record<AdminRole, ReadonlySet<Permission>>> = {
  // Only owners manage admin accounts, so an admin cannot promote itself.
  owner: new Set(permissions),
  admin: new Set(permissions.filter((p) => p !== 'admins:manage')),
  approver: new Set<Permission>([...READ, 'approvals:decide']),
  auditor: new Set<Permission>([...READ, 'audit:read']),
  viewer: new Set<Permission>(READ),
};

export function hasPermission(roles: readonly string[], permission: Permission): boolean {
  return roles.some((r) => (rolePermissions as Record<string, ReadonlySet<Permission> | undefined>)[r]?.has(permission) ?? false);
}
