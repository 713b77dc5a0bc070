// Errors as pages for browsers: a refused permission, a missing CSRF token or an unknown page read as a sentence on the layout, never a JSON dump.
import type { PageContext } from './context.js';
import { BareLayout, Layout } from './layout.js';

const TITLES: Record<number, string> = {
  400: 'Bad request',
  401: 'Sign in required',
  403: 'Not allowed',
  404: 'Page not found',
  409: 'Conflict',
  413: 'Too large',
  415: 'Unsupported content type',
  422: 'Invalid input',
  429: 'Too many requests',
  500: 'Something went wrong',
  503: 'Temporarily unavailable',
};

export function errorPage(ctx: PageContext, status: number, message: string): JSX.Element {
  const title = TITLES[status] ?? 'Error';
  const body = (
    <div class="error-page">
      <p class="form-error" role="alert" safe>
        {message}
      </p>
      <p>
        <a href="/dashboard/overview">Back to the overview</a>
      </p>
    </div>
  );
  if (ctx.admin && !ctx.admin.mustChangePassword) {
    return (
      <Layout ctx={ctx} title={title}>
        {body}
      </Layout>
    );
  }
  return (
    <BareLayout title={title} theme={ctx.theme}>
      {body}
    </BareLayout>
  );
}
