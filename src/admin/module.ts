// What an admin feature module is: a function that adds its routes to the admin listener; only modules.ts knows the list.
import type { FastifyInstance } from 'fastify';
import type { ApiRegistry } from './api/route.js';
import type { Services } from '../runtime/services.js';

export interface AdminModuleContext {
  app: FastifyInstance;
  api: ApiRegistry;
  services: Services;
}

export type AdminModule = (ctx: AdminModuleContext) => Promise<void> | void;
