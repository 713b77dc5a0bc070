// The sign-in and change-password pages: small server-rendered HTML where every interpolated value is escaped.

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** The page frame of the console: every caller escapes what it interpolates (escapeHtml). */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${escapeHtml(title)} · Gatehouse</title>
<style>
body{font-family:system-ui,sans-serif;background:#f4f5f7;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center}
main{background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px rgba(0,0,0,.12);width:22rem}
h1{font-size:1.25rem;margin:0 0 1rem}label{display:block;margin:.75rem 0 .25rem}
input{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem}
button{margin-top:1.25rem;width:100%;padding:.6rem;font-size:1rem}
.error{color:#a40000;background:#fdecea;padding:.5rem;border-radius:4px}
</style>
</head>
<body><main>
${body}
</main></body>
</html>
`;
}

export function loginPage(opts: { username?: string; next?: string; error?: string }): string {
  return page(
    'Sign in',
    `<h1>Sign in to Gatehouse</h1>
${opts.error ? `<p class="error" role="alert">${escapeHtml(opts.error)}</p>` : ''}
<form method="post" action="/auth/login">
<label for="username">Username</label>
<input id="username" name="username" autocomplete="username" required maxlength="128" value="${escapeHtml(opts.username ?? '')}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
${opts.next ? `<input type="hidden" name="next" value="${escapeHtml(opts.next)}">` : ''}
<button type="submit">Sign in</button>
</form>`,
  );
}

export function changePasswordPage(opts: { username: string; csrfToken: string; next?: string; error?: string }): string {
  return page(
    'Change password',
    `<h1>Change the password of ${escapeHtml(opts.username)}</h1>
${opts.error ? `<p class="error" role="alert">${escapeHtml(opts.error)}</p>` : ''}
<form method="post" action="/auth/change-password">
<input type="hidden" name="csrf_token" value="${escapeHtml(opts.csrfToken)}">
${opts.next ? `<input type="hidden" name="next" value="${escapeHtml(opts.next)}">` : ''}
<label for="current_password">Current password</label>
<input id="current_password" name="current_password" type="password" autocomplete="current-password" required>
<label for="new_password">New password (at least 12 characters)</label>
<input id="new_password" name="new_password" type="password" autocomplete="new-password" required minlength="12">
<label for="confirm_password">Repeat the new password</label>
<input id="confirm_password" name="confirm_password" type="password" autocomplete="new-password" required minlength="12">
<button type="submit">Change password</button>
</form>
<form method="post" action="/auth/logout">
<input type="hidden" name="csrf_token" value="${escapeHtml(opts.csrfToken)}">
<button type="submit">Sign out</button>
</form>`,
  );
}

/** `next` only when it is a same-origin path: one leading slash, no scheme, no backslash, no control characters. */
export function safeNext(next: unknown, fallback = '/dashboard/overview'): string {
  if (typeof next !== 'string' || next.length === 0 || next.length > 2048) return fallback;
  if (!next.startsWith('/') || next.startsWith('//') || next.includes('\\')) return fallback;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(next)) return fallback;
  return next;
}
