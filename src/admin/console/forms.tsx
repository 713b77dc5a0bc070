// Console forms: field components that show the 422 detail at each field with the entered values kept, the CSRF field, form-body schemas, and the route helper every console form uses.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { escapeHtml } from '@kitajs/html';
import { z } from 'zod';
import { isGatehouseError } from '../../errors/registry.js';
import { validationItems, type ValidationErrorItem } from '../../http/validation.js';
import type { ApiRegistry } from '../api/route.js';
import { storeErrorAsHttp } from '../api/shared.js';
import type { Permission } from '../auth/permissions.js';
import { demand, pageContext, sendPage, wantsJson, type PageContext } from './context.js';
import { CsrfField } from './layout.js';

/** What a form is rendered with: the values to show, one message per field, and a message for the whole form. */
export interface FormState {
  values: Record<string, string>;
  errors: Record<string, string>;
  message?: string;
}

export function emptyForm(values: Record<string, string> = {}): FormState {
  return { values, errors: {} };
}

/** Fields whose values are never sent back to the browser, not even to re-show a form. */
const SECRET_FIELDS = new Set(['password', 'pg_password', 'token', 'api_key', 'current_password', 'new_password', 'confirm_password', 'csrf_token', 'admin_client_secret']);

/** The submitted values that may be shown again (strings only, secrets dropped). */
export function keptValues(body: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!body || typeof body !== 'object') return out;
  for (const [k, v] of Object.entries(body)) {
    if (SECRET_FIELDS.has(k)) continue;
    if (typeof v === 'string') out[k] = v;
    else if (Array.isArray(v)) out[k] = v.filter((x) => typeof x === 'string').join(', ');
  }
  return out;
}

/** A 422 item as a sentence a person reads beside the field. */
export function humanMessage(item: ValidationErrorItem): string {
  if (item.type === 'missing') return 'This field is required.';
  if (item.type === 'extra_forbidden') return `${String(item.loc.at(-1))} is not a field of this form.`;
  const msg = item.msg.trim();
  const sentence = msg.charAt(0).toUpperCase() + msg.slice(1);
  return /[.!?]$/.test(sentence) ? sentence : `${sentence}.`;
}

/** The form state for a 422 detail: items at ["body", field, ...] go to that field, the rest to the form. */
export function formStateFrom(body: unknown, items: readonly ValidationErrorItem[], message?: string): FormState {
  const state: FormState = { values: keptValues(body), errors: {} };
  const general: string[] = [];
  for (const item of items) {
    const field = item.loc[0] === 'body' && typeof item.loc[1] === 'string' ? item.loc[1] : undefined;
    const text = humanMessage(item);
    if (field && !state.errors[field]) state.errors[field] = text;
    else if (!field) general.push(text);
  }
  const summary = message ?? (Object.keys(state.errors).length > 0 ? 'Some fields need attention; see the messages beside them.' : undefined);
  const joined = [summary, ...general].filter(Boolean).join(' ');
  if (joined) state.message = joined;
  return state;
}

// ---- form-body schemas: HTML forms send every field as a string, '' when left empty (spec §2 "Console form bodies")

/** An optional text field: absent or empty is ''; surrounding whitespace dropped. */
export const optionalText = (max = 1024) => z.preprocess((v) => (v === undefined || v === null ? '' : v), z.string().trim().max(max));

/** A required text field: absent is "Field required", blank is "This field is required". */
export const requiredText = (max = 1024) => z.string().trim().min(1, 'This field is required').max(max);

/** An integer field with a default when absent or empty. */
export const intText = (def: number, min = 0, max = 2_147_483_647) =>
  z.preprocess((v) => (v === undefined || v === null || (typeof v === 'string' && v.trim() === '') ? def : typeof v === 'string' ? v.trim() : v), z.coerce.number({ error: 'Enter a whole number' }).int('Enter a whole number').min(min).max(max));

/** A number field with a default when absent or empty. */
export const numberText = (def: number) =>
  z.preprocess((v) => (v === undefined || v === null || (typeof v === 'string' && v.trim() === '') ? def : v), z.coerce.number({ error: 'Enter a number' }).refine(Number.isFinite, 'Enter a number'));

/** A checkbox: checked sends "on" (or true/1/yes); unchecked sends nothing. */
export const checkbox = () => z.preprocess((v) => v === true || (typeof v === 'string' && ['on', 'true', '1', 'yes'].includes(v.toLowerCase())), z.boolean());

/** One of a fixed set, with a default when absent or empty. */
export const choice = <const T extends readonly [string, ...string[]]>(values: T, def?: T[number]) => {
  // A string first, so an absent field is reported as missing (invalid_type) rather than as a wrong choice.
  const one = z.string().pipe(z.enum(values, { error: `Choose one of: ${values.join(', ')}` }));
  return def === undefined ? one : z.preprocess((v) => (v === undefined || v === '' ? def : v), one);
};

// ---- components

/**
 * An attribute value that shows exactly the text given. @kitajs/html escapes only `"` in attributes (enough against
 * injection, as every value is double-quoted), but `&amp;` typed by a user would read back as `&`; escaping it all
 * first keeps the value byte for byte (kitajs then finds no quote left to escape).
 */
export function attrValue(value: string): string {
  return escapeHtml(value);
}

interface FieldBase {
  form: FormState;
  name: string;
  label: string;
  hint?: string;
  required?: boolean;
  /** The value shown when the form has none for this field (a default of the spec). */
  value?: string;
}

function ids(name: string) {
  return { id: `f-${name}`, hint: `f-${name}-hint`, error: `f-${name}-error` };
}

function describedBy(name: string, hint: string | undefined, error: string | undefined): string | undefined {
  const i = ids(name);
  const parts = [hint ? i.hint : '', error ? i.error : ''].filter(Boolean);
  return parts.length > 0 ? parts.join(' ') : undefined;
}

function FieldFrame({ form, name, label, hint, required, children }: FieldBase & { children: JSX.Element }): JSX.Element {
  const error = form.errors[name];
  const i = ids(name);
  return (
    <div class={error ? 'field has-error' : 'field'}>
      <label for={i.id}>
        <span safe>{label}</span>
        {required ? <span class="required"> (required)</span> : ''}
      </label>
      {hint ? (
        <p class="hint" id={i.hint} safe>
          {hint}
        </p>
      ) : (
        ''
      )}
      {children}
      {error ? (
        <p class="field-error" id={i.error} safe>
          {error}
        </p>
      ) : (
        ''
      )}
    </div>
  );
}

export interface InputFieldProps extends FieldBase {
  type?: 'text' | 'password' | 'number' | 'url' | 'datetime-local' | 'search' | 'email';
  autocomplete?: string;
  placeholder?: string;
  maxlength?: number;
  min?: number;
  max?: number;
}

/** A labelled input; a password input never shows a value back. */
export function Field(props: InputFieldProps): JSX.Element {
  const { form, name, type = 'text' } = props;
  const error = form.errors[name];
  const value = type === 'password' ? undefined : attrValue(form.values[name] ?? props.value ?? '');
  return (
    <FieldFrame {...props}>
      <input
        id={ids(name).id}
        name={name}
        type={type}
        value={value}
        required={props.required}
        autocomplete={props.autocomplete}
        placeholder={props.placeholder}
        maxlength={props.maxlength}
        min={props.min}
        max={props.max}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={describedBy(name, props.hint, error)}
      />
    </FieldFrame>
  );
}

export function TextAreaField(props: FieldBase & { rows?: number; code?: boolean }): JSX.Element {
  const { form, name } = props;
  const error = form.errors[name];
  return (
    <FieldFrame {...props}>
      <textarea
        id={ids(name).id}
        name={name}
        rows={String(props.rows ?? 4)}
        required={props.required}
        class={props.code ? 'code' : undefined}
        spellcheck={props.code ? 'false' : undefined}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={describedBy(name, props.hint, error)}
        safe
      >
        {form.values[name] ?? props.value ?? ''}
      </textarea>
    </FieldFrame>
  );
}

export function SelectField(props: FieldBase & { options: ReadonlyArray<readonly [value: string, label: string]> }): JSX.Element {
  const { form, name } = props;
  const error = form.errors[name];
  const selected = form.values[name] ?? props.value ?? '';
  return (
    <FieldFrame {...props}>
      <select id={ids(name).id} name={name} required={props.required} aria-invalid={error ? 'true' : undefined} aria-describedby={describedBy(name, props.hint, error)}>
        {props.options.map(([value, label]) => (
          <option value={value} selected={value === selected} safe>
            {label}
          </option>
        ))}
      </select>
    </FieldFrame>
  );
}

export function CheckboxField({ form, name, label, hint, checked }: Omit<FieldBase, 'value'> & { checked?: boolean }): JSX.Element {
  const i = ids(name);
  const error = form.errors[name];
  const value = form.values[name];
  const on = value !== undefined ? ['on', 'true', '1', 'yes'].includes(value.toLowerCase()) : (checked ?? false);
  return (
    <div class={error ? 'field checkbox has-error' : 'field checkbox'}>
      <input id={i.id} name={name} type="checkbox" checked={on} aria-describedby={describedBy(name, hint, error)} />
      <label for={i.id} safe>
        {label}
      </label>
      {hint ? (
        <p class="hint" id={i.hint} safe>
          {hint}
        </p>
      ) : (
        ''
      )}
      {error ? (
        <p class="field-error" id={i.error} safe>
          {error}
        </p>
      ) : (
        ''
      )}
    </div>
  );
}

export interface ConsoleFormProps {
  ctx: PageContext;
  form: FormState;
  action: string;
  submit: string;
  /** Extra attributes, e.g. htmx's hx-post/hx-target for an inline result (the form works without them). */
  attrs?: Record<string, string>;
  class?: string;
  children?: JSX.Element | JSX.Element[];
}

/** A POST form with the CSRF field, the form-level message (role=alert) and one submit button. */
export function ConsoleForm({ ctx, form, action, submit, attrs, children, ...rest }: ConsoleFormProps): JSX.Element {
  return (
    <form method="post" action={action} class={rest.class ?? 'console-form'} {...(attrs ?? {})}>
      {form.message ? (
        <p class="form-error" role="alert" safe>
          {form.message}
        </p>
      ) : (
        ''
      )}
      <CsrfField ctx={ctx} />
      {children ?? ''}
      <div class="form-actions">
        <button type="submit" class="button" safe>
          {submit}
        </button>
      </div>
    </form>
  );
}

// ---- the route helper

export interface ConsoleFormRoute<S extends z.ZodType> {
  url: string;
  summary: string;
  /** Checked before the body is looked at; the guard has already checked the session and the CSRF token. */
  permission: Permission | null;
  schema: S;
  /** The page holding the form, rendered again with `state` on invalid input (422) or a refused write (409). */
  render(req: FastifyRequest, ctx: PageContext, state: FormState): Promise<JSX.Element> | JSX.Element;
  /** Does the work with the parsed body; answers with a redirect (303) or a page. May throw validationError for field problems. */
  handle(args: { req: FastifyRequest; reply: FastifyReply; ctx: PageContext; body: z.output<S> }): Promise<FastifyReply | JSX.Element>;
}

/**
 * Registers a console form endpoint: form-encoded body (spec §2 "Console form bodies"), permission check, and on
 * invalid input the page again with every message at its field and the values kept (status 422) for browsers, or
 * the spec's 422 JSON for callers that ask for JSON.
 */
export function registerConsoleForm<S extends z.ZodType>(app: FastifyInstance, api: ApiRegistry, route: ConsoleFormRoute<S>): void {
  api.describe({ method: 'POST', url: route.url, summary: route.summary, tags: ['console'], body: route.schema, consumes: ['application/x-www-form-urlencoded'], produces: ['text/html'], successStatus: 303 });
  app.post(route.url, async (req, reply) => {
    const ctx = pageContext(req);
    if (route.permission) demand(ctx, route.permission);
    const raw = req.body && typeof req.body === 'object' ? req.body : {};
    try {
      const parsed = route.schema.safeParse(raw);
      if (!parsed.success) {
        const items = validationItems('body', parsed.error, raw);
        if (wantsJson(req)) return reply.code(422).send({ detail: items });
        return sendPage(reply, await route.render(req, ctx, formStateFrom(raw, items)), 422);
      }
      const out = await route.handle({ req, reply, ctx, body: parsed.data });
      if ((out as unknown) === reply || reply.sent) return reply;
      return sendPage(reply, out as JSX.Element);
    } catch (raised) {
      const err = storeErrorAsHttp(raised) ?? raised;
      if (wantsJson(req) || !isGatehouseError(err)) throw err;
      if (err.code === 'validation_failed') {
        const items = (err.details?.detail ?? []) as ValidationErrorItem[];
        return sendPage(reply, await route.render(req, ctx, formStateFrom(raw, items)), 422);
      }
      if (err.code === 'conflict' || err.code === 'not_found') {
        return sendPage(reply, await route.render(req, ctx, { values: keptValues(raw), errors: {}, message: err.message }), err.spec.http);
      }
      throw err;
    }
  });
}

// ---- pages for the form endpoints registered with api.route (sign-in, change password, policy forms)

export type FormPage = (req: FastifyRequest, ctx: PageContext, state: FormState) => Promise<JSX.Element> | JSX.Element;

const formPages = new WeakMap<FastifyInstance, Map<string, FormPage>>();

/** Lets a form endpoint declared with api.route answer a browser's invalid input with its page (422) instead of JSON. */
export function registerFormPage(app: FastifyInstance, method: 'POST', url: string, page: FormPage): void {
  let pages = formPages.get(app);
  if (!pages) formPages.set(app, (pages = new Map()));
  pages.set(`${method} ${url}`, page);
}

/**
 * The page for a refused browser form post (validation items at their fields, or a conflict's message for the whole
 * form), or null when the route has none, the caller wants JSON, or the page itself cannot be built (e.g. the record
 * it shows is gone): the caller then answers with the error page.
 */
export async function formErrorPage(app: FastifyInstance, req: FastifyRequest, items: readonly ValidationErrorItem[], message?: string): Promise<JSX.Element | null> {
  if (wantsJson(req)) return null;
  const page = formPages.get(app)?.get(`${req.method} ${req.routeOptions.url ?? ''}`);
  if (!page) return null;
  try {
    return await page(req, pageContext(req), formStateFrom(req.body, items, message));
  } catch {
    return null;
  }
}
