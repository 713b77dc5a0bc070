// The console pages of alert rules (spec §4 POST /dashboard/alerts/create and /dashboard/alerts/dry-run): list with state, create, edit, enable/disable/delete, history with a link to the audit of the scope and window, and the dry run with its 24 h sparkline.
import { z } from 'zod';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AdminModuleContext } from '../admin/module.js';
import { demand, pageContext, sendPage, type PageContext } from '../admin/console/context.js';
import { ConsoleForm, emptyForm, Field, registerConsoleForm, SelectField, type FormState } from '../admin/console/forms.js';
import { CsrfField, Layout } from '../admin/console/layout.js';
import { DataTable } from '../admin/console/data-table.js';
import { intId } from '../admin/api/route.js';
import { validationError } from '../http/validation.js';
import { CHANNELS, COMPARATORS, CONDITION_TYPES, WINDOW_DEFAULT_SECONDS } from './conditions.js';
import { auditQuery } from './delivery.js';
import { dryRun, type DryRunResult } from './dry-run.js';
import { windowStart } from './figures.js';
import { dryRunSchema, formCreateSchema, listEvents, listRules, maskedTarget } from './rules.js';
import type { AlertActions } from './routes.js';
import { referenceProblems } from './routes.js';
import type { AlertRule } from './schema.js';

const idParams = z.strictObject({ id: intId });

const option = (v: string): readonly [string, string] => [v, v];

/** The console's audit explorer (the audit search API where the console has none), filtered to the scope and window. */
function auditLink(app: FastifyInstance, rule: Pick<AlertRule, 'identity_id' | 'source_id' | 'window_seconds'>, at: Date): string {
  const base = app.hasRoute({ method: 'GET', url: '/dashboard/audit' }) ? '/dashboard/audit' : '/api/audit';
  return auditQuery(rule, { from: windowStart(at.getTime(), rule.window_seconds).toISOString(), to: at.toISOString() }, base);
}

function StateBadge({ state }: { state: AlertRule['state'] }): JSX.Element {
  const cls = state === 'firing' ? 'badge bad' : state === 'resolved' ? 'badge warn' : 'badge ok';
  return (
    <span class={cls} safe>
      {state}
    </span>
  );
}

/** The fields of spec §2 "Alert rule create" (the dry run takes the same ones, all optional). */
function RuleFields({ form, dry }: { form: FormState; dry?: boolean }): JSX.Element {
  return (
    <>
      <Field form={form} name="name" label="Name" required={!dry} maxlength={128} value={dry ? 'unsaved-rule' : ''} />
      <SelectField form={form} name="condition_type" label="Condition" required={!dry} value="error_rate" options={CONDITION_TYPES.map(option)} hint="Formulas: docs/alerts.md" />
      <SelectField form={form} name="comparator" label="Comparator" value=">" options={COMPARATORS.map(option)} />
      <Field form={form} name="threshold" label="Threshold" required={!dry} value={dry ? '0.1' : ''} hint="error_rate and denial_rate are shares between 0 and 1" />
      <Field form={form} name="window_seconds" label="Window (seconds)" type="number" min={60} max={86_400} value={String(WINDOW_DEFAULT_SECONDS)} />
      <Field form={form} name="identity_id" label="Identity id" hint="Empty: every identity" />
      <Field form={form} name="source_id" label="Source id" hint="Empty: every source" />
      <SelectField form={form} name="notification_channel" label="Notification channel" value="log" options={CHANNELS.map(option)} />
      <Field form={form} name="notification_target" label="Notification target" hint="Slack: a channel; webhook: the URL to POST to; log: empty" maxlength={2048} />
      {dry ? '' : <Field form={form} name="description" label="Description" maxlength={1000} />}
    </>
  );
}

function formValues(r: AlertRule): Record<string, string> {
  return {
    name: r.name,
    condition_type: r.condition_type,
    comparator: r.comparator,
    threshold: String(r.threshold),
    window_seconds: String(r.window_seconds),
    identity_id: r.identity_id === null ? '' : String(r.identity_id),
    source_id: r.source_id ?? '',
    notification_channel: r.notification_channel,
    notification_target: r.notification_channel === 'webhook' ? '' : r.notification_target,
    description: r.description,
  };
}

function Sparkline({ points }: { points: DryRunResult['sparkline'] }): JSX.Element {
  const values = points.map((p) => p.value).filter((v): v is number => v !== null);
  const max = Math.max(1e-9, ...values);
  const w = 240;
  const h = 40;
  const step = w / Math.max(1, points.length - 1);
  const runs: string[][] = [[]];
  points.forEach((p, i) => {
    if (p.value === null) {
      if (runs.at(-1)!.length > 0) runs.push([]);
      return;
    }
    runs.at(-1)!.push(`${(i * step).toFixed(1)},${(h - 2 - (p.value / max) * (h - 4)).toFixed(1)}`);
  });
  const label = `Value over the last 24 hours, hourly: ${points.map((p) => (p.value === null ? 'no data' : String(Math.round(p.value * 1000) / 1000))).join(', ')}`;
  return (
    <svg class="sparkline" width={String(w)} height={String(h)} viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
      {runs.filter((r) => r.length > 0).map((r) => (r.length === 1 ? <circle cx={r[0]!.split(',')[0]} cy={r[0]!.split(',')[1]} r="2" fill="currentColor" /> : <polyline points={r.join(' ')} fill="none" stroke="currentColor" stroke-width="2" />))}
    </svg>
  );
}

function DryRunPage({ ctx, form, result }: { ctx: PageContext; form: FormState; result?: DryRunResult }): JSX.Element {
  return (
    <Layout ctx={ctx} title="Alert dry run" crumbs={[{ label: 'Alerts', href: '/dashboard/alerts' }, { label: 'Dry run' }]}>
      <p>Evaluates an unsaved rule against the audit log now. Nothing is stored or sent.</p>
      <ConsoleForm ctx={ctx} form={form} action="/dashboard/alerts/dry-run" submit="Evaluate">
        <RuleFields form={form} dry />
      </ConsoleForm>
      {result ? (
        <section class="panel" aria-labelledby="dry-run-result">
          <h2 id="dry-run-result">Result</h2>
          <dl class="props">
            <dt>Measured value</dt>
            <dd safe>{String(result.value)}</dd>
            <dt>Would fire</dt>
            <dd>{result.would_fire ? <span class="badge bad">yes</span> : <span class="badge ok">no</span>}</dd>
            <dt>Rule</dt>
            <dd safe>{`${result.condition_type} ${result.comparator} ${result.threshold} over ${result.window_seconds} s`}</dd>
            <dt>Window</dt>
            <dd safe>{`${result.window.from} to ${result.window.to}`}</dd>
            <dt>Last 24 hours</dt>
            <dd>
              <Sparkline points={result.sparkline} />
            </dd>
          </dl>
        </section>
      ) : (
        ''
      )}
    </Layout>
  );
}

export function registerAlertPages({ app, api, services }: AdminModuleContext, actions: AlertActions): void {
  const { db } = actions;

  const formPage = (ctx: PageContext, form: FormState, rule?: AlertRule): JSX.Element => (
    <Layout ctx={ctx} title={rule ? `Edit ${rule.name}` : 'New alert rule'} crumbs={[{ label: 'Alerts', href: '/dashboard/alerts' }, { label: rule ? 'Edit' : 'New rule' }]}>
      <ConsoleForm ctx={ctx} form={form} action={rule ? `/dashboard/alerts/${rule.id}/update` : '/dashboard/alerts/create'} submit={rule ? 'Save rule' : 'Create rule'}>
        <RuleFields form={form} />
      </ConsoleForm>
      {rule?.notification_channel === 'webhook' ? <p>The webhook URL is not shown again; enter it to change it, or leave it empty to keep it.</p> : ''}
    </Layout>
  );

  const secretPage = (ctx: PageContext, rule: AlertRule, secret: string): JSX.Element => (
    <Layout ctx={ctx} title={`Alert rule ${rule.name}`} crumbs={[{ label: 'Alerts', href: '/dashboard/alerts' }, { label: rule.name }]}>
      <div class="notice success" role="status">
        <p>The rule sends signed webhooks. Copy the signing secret now: it is not shown again.</p>
        <p>
          <code class="secret" safe>
            {secret}
          </code>
        </p>
        <p>
          <a href={`/dashboard/alerts/${rule.id}`}>Continue to the rule</a>
        </p>
      </div>
    </Layout>
  );

  api.describe({ method: 'GET', url: '/dashboard/alerts', summary: 'Alert rules page: every rule with its state', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/alerts', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'alerts:read');
    const rules = await listRules(db);
    const actionsBar = (
      <>
        {ctx.can('alerts:write') ? (
          <a class="button" href="/dashboard/alerts/new">
            New rule
          </a>
        ) : (
          ''
        )}
        <a class="button secondary" href="/dashboard/alerts/dry-run">
          Dry run
        </a>
      </>
    );
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Alerts" crumbs={[{ label: 'Alerts' }]} actions={actionsBar}>
        <DataTable
          rows={rules}
          empty="No alert rules yet."
          columns={[
            { label: 'Name', cell: (r) => <a href={`/dashboard/alerts/${encodeURIComponent(String(r.id))}`} safe>{r.name}</a> },
            { label: 'State', cell: (r) => <StateBadge state={r.state} /> },
            { label: 'Condition', text: (r) => `${r.condition_type} ${r.comparator} ${r.threshold} over ${r.window_seconds} s` },
            { label: 'Scope', text: (r) => `${r.source_id ?? 'every source'}, ${r.identity_id === null ? 'every identity' : `identity ${r.identity_id}`}` },
            { label: 'Last value', text: (r) => (r.last_value === null ? '—' : String(r.last_value)) },
            { label: 'Channel', text: (r) => r.notification_channel },
            { label: 'Enabled', text: (r) => (r.enabled ? 'yes' : 'no') },
          ]}
        />
      </Layout>,
    );
  });

  api.describe({ method: 'GET', url: '/dashboard/alerts/new', summary: 'New alert rule form', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/alerts/new', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'alerts:write');
    return sendPage(reply, formPage(ctx, emptyForm()));
  });

  registerConsoleForm(app, api, {
    url: '/dashboard/alerts/create',
    summary: 'Create an alert rule (form, spec §2 "Alert rule create"); 303 to the rule, or the page with the webhook secret shown once',
    permission: 'alerts:write',
    schema: formCreateSchema,
    render: (_req, ctx, form) => formPage(ctx, form),
    handle: async ({ req, reply, ctx, body }) => {
      const { row, secret } = await actions.create(req, { ...body, enabled: true });
      if (secret !== null) return secretPage(ctx, row, secret);
      return reply.redirect(`/dashboard/alerts/${row.id}`, 303);
    },
  });

  const dryRunForm = dryRunSchema(true);
  api.describe({ method: 'GET', url: '/dashboard/alerts/dry-run', summary: 'Alert dry-run form', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/alerts/dry-run', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'alerts:read');
    return sendPage(reply, <DryRunPage ctx={ctx} form={emptyForm()} />);
  });
  registerConsoleForm(app, api, {
    url: '/dashboard/alerts/dry-run',
    summary: 'Dry run of an unsaved alert rule (form, spec §2 "Alert rule dry run"): measured value, would it fire, 24 h sparkline; stores and sends nothing',
    permission: 'alerts:read',
    schema: dryRunForm,
    render: (_req, ctx, form) => <DryRunPage ctx={ctx} form={form} />,
    handle: async ({ req, ctx, body }) => {
      const problems = await referenceProblems(services, body);
      if (problems.length > 0) throw validationError(problems);
      const result = await dryRun(db, body, Date.now());
      const kept = Object.fromEntries(Object.entries((req.body ?? {}) as Record<string, unknown>).filter(([k, v]) => k !== 'csrf_token' && typeof v === 'string')) as Record<string, string>;
      return <DryRunPage ctx={ctx} form={emptyForm(kept)} result={result} />;
    },
  });

  const ruleFrom = async (req: FastifyRequest): Promise<AlertRule> => {
    const parsed = idParams.safeParse(req.params);
    if (!parsed.success) throw validationError([{ loc: ['path', 'id'], msg: 'Input should be a valid integer', type: 'int_parsing' }]);
    return actions.load(parsed.data.id);
  };

  api.describe({ method: 'GET', url: '/dashboard/alerts/:id', summary: 'An alert rule: state, history of firings, link to the audit of its scope and window', tags: ['console'], params: idParams, produces: ['text/html'] });
  app.get('/dashboard/alerts/:id', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'alerts:read');
    const rule = await ruleFrom(req);
    const events = await listEvents(db, rule.id, 100);
    const write = ctx.can('alerts:write');
    const button = (action: string, label: string, cls = 'button small secondary') => (
      <form method="post" action={`/dashboard/alerts/${rule.id}/${action}`} class="inline-form">
        <CsrfField ctx={ctx} />
        <button type="submit" class={cls} safe>
          {label}
        </button>
      </form>
    );
    const bar = write ? (
      <>
        <a class="button" href={`/dashboard/alerts/${rule.id}/edit`}>
          Edit
        </a>
        {rule.enabled ? button('disable', 'Disable') : button('enable', 'Enable')}
        {button('delete', 'Delete', 'button small danger')}
      </>
    ) : (
      <></>
    );
    return sendPage(
      reply,
      <Layout ctx={ctx} title={`Alert rule ${rule.name}`} crumbs={[{ label: 'Alerts', href: '/dashboard/alerts' }, { label: rule.name }]} actions={bar}>
        <dl class="props">
          <dt>State</dt>
          <dd>
            <StateBadge state={rule.state} /> <span safe>{rule.state_since ? `since ${rule.state_since.toISOString()}` : ''}</span>
          </dd>
          <dt>Condition</dt>
          <dd safe>{`${rule.condition_type} ${rule.comparator} ${rule.threshold} over ${rule.window_seconds} s`}</dd>
          <dt>Scope</dt>
          <dd safe>{`${rule.source_id ?? 'every source'}, ${rule.identity_id === null ? 'every identity' : `identity ${rule.identity_id}`}`}</dd>
          <dt>Last value</dt>
          <dd safe>{rule.last_value === null ? '—' : `${rule.last_value} at ${rule.last_evaluated_at?.toISOString() ?? ''}`}</dd>
          <dt>Notification</dt>
          <dd safe>{`${rule.notification_channel} ${maskedTarget(rule.notification_channel, rule.notification_target)}`}</dd>
          <dt>Last delivery error</dt>
          <dd safe>{rule.last_delivery_error ?? 'none'}</dd>
          <dt>Enabled</dt>
          <dd>{rule.enabled ? 'yes' : 'no'}</dd>
          <dt>Description</dt>
          <dd safe>{rule.description || '—'}</dd>
        </dl>
        <p>
          <a href={auditLink(app, rule, new Date())}>Audit entries of this scope in the current window</a>
        </p>
        <h2>History</h2>
        <DataTable
          rows={events}
          empty="No firings yet."
          columns={[
            { label: 'Time', text: (e) => e.ts.toISOString() },
            { label: 'Event', text: (e) => e.kind },
            { label: 'Value', text: (e) => `${e.value} (${rule.comparator} ${e.threshold})` },
            { label: 'Delivery', text: (e) => (e.delivery_error ? `${e.delivery_status}: ${e.delivery_error}` : e.delivery_status) },
            { label: 'Audit', cell: (e) => <a href={auditLink(app, rule, e.ts)}>entries</a> },
          ]}
        />
      </Layout>,
    );
  });

  api.describe({ method: 'GET', url: '/dashboard/alerts/:id/edit', summary: 'Edit alert rule form', tags: ['console'], params: idParams, produces: ['text/html'] });
  app.get('/dashboard/alerts/:id/edit', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'alerts:write');
    const rule = await ruleFrom(req);
    return sendPage(reply, formPage(ctx, emptyForm(formValues(rule)), rule));
  });

  registerConsoleForm(app, api, {
    url: '/dashboard/alerts/:id/update',
    summary: 'Update an alert rule (form: the create form\'s fields); 303 to the rule',
    permission: 'alerts:write',
    schema: formCreateSchema,
    render: async (req, ctx, form) => formPage(ctx, form, await ruleFrom(req)),
    handle: async ({ req, reply, ctx, body }) => {
      const rule = await ruleFrom(req);
      // A webhook URL is not shown in the form; left empty it stays as it was.
      const target = body.notification_channel === 'webhook' && rule.notification_channel === 'webhook' && body.notification_target === '' ? undefined : body.notification_target;
      const { row, secret } = await actions.update(req, rule.id, { ...body, ...(target === undefined ? { notification_target: undefined } : {}) });
      if (secret !== null) return secretPage(ctx, row, secret);
      return reply.redirect(`/dashboard/alerts/${row.id}`, 303);
    },
  });

  for (const action of ['enable', 'disable', 'delete'] as const) {
    registerConsoleForm(app, api, {
      url: `/dashboard/alerts/:id/${action}`,
      summary: `${action[0]!.toUpperCase()}${action.slice(1)} an alert rule (form: the CSRF field only); 303 to the rule or the list`,
      permission: 'alerts:write',
      schema: z.object({}),
      render: async (req, ctx) => formPage(ctx, emptyForm(formValues(await ruleFrom(req))), await ruleFrom(req)),
      handle: async ({ req, reply }) => {
        const rule = await ruleFrom(req);
        if (action === 'delete') {
          await actions.remove(req, rule.id);
          return reply.redirect('/dashboard/alerts', 303);
        }
        await actions.setEnabled(req, rule.id, action === 'enable');
        return reply.redirect(`/dashboard/alerts/${rule.id}`, 303);
      },
    });
  }
}
