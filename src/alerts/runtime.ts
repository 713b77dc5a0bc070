// The alert evaluator of a worker process, built from configuration and registered as a periodic worker task (docs/alerts.md "Evaluation").
import { transportFrom } from '../notify/index.js';
import type { Services } from '../runtime/services.js';
import type { PeriodicTask } from '../worker/worker.js';
import { AlertDelivery } from './delivery.js';
import { AlertEvaluator } from './evaluator.js';
import { alertsDb } from './routes.js';
import { WebhookSecretBox } from './secret.js';

export function buildAlertEvaluator(services: Services, holder: string): AlertEvaluator {
  const n = services.config.notifications;
  const log = services.log.child({ component: 'alerts' });
  const delivery = new AlertDelivery({
    log,
    slack: n.enabled ? transportFrom(services) : null,
    allowPrivateEgress: n.allow_private_egress,
    timeoutMs: n.timeout_seconds * 1000,
    maxAttempts: n.max_attempts,
    box: new WebhookSecretBox(services.secrets.get('approvals.encryption_key_ref')),
    adminBaseUrl: n.admin_base_url,
  });
  const evaluator = new AlertEvaluator({
    db: alertsDb(services),
    coord: services.coord,
    log,
    intervalMs: services.config.worker.alert_interval_seconds * 1000,
    repeatMs: services.config.worker.alert_repeat_seconds * 1000,
    delivery,
    holder,
  });
  services.onClose(async () => {
    await evaluator.stop();
    await delivery.close();
  });
  return evaluator;
}

/** The worker task: one tick per worker.alert_interval_seconds; ticks never overlap in one process. */
export function alertEvaluationTask(services: Services, holder: string): PeriodicTask & { evaluator: AlertEvaluator } {
  const evaluator = buildAlertEvaluator(services, holder);
  let running: Promise<unknown> | null = null;
  return {
    name: 'alerts-evaluate',
    intervalMs: services.config.worker.alert_interval_seconds * 1000,
    runAtStart: true,
    evaluator,
    run: async () => {
      if (running) return;
      running = evaluator.tick().finally(() => (running = null));
      await running;
    },
  };
}
