import type Router from '@koa/router';
import type { AnalyticsService } from '../core/analytics/analytics-service.js';
import type { ApiKeyService } from '../core/api-keys/api-key-service.js';
import type { CampaignService } from '../core/campaigns/campaign-service.js';
import type { ContactBookService } from '../core/contacts/contact-book-service.js';
import type { ContactImportService } from '../core/contacts/contact-import-service.js';
import type { ContactService } from '../core/contacts/contact-service.js';
import type { DeliveryService } from '../core/deliveries/delivery-service.js';
import type { DomainService } from '../core/domains/domain-service.js';
import type { EmailService } from '../core/emails/email-service.js';
import type { AuditService } from '../core/operators/audit-service.js';
import type { OverviewService } from '../core/overview/overview-service.js';
import type { QueueService } from '../core/queue/queue-service.js';
import type { ReceivedEmailService } from '../core/received/received-email-service.js';
import type { SegmentService } from '../core/segments/segment-service.js';
import type { SuppressionService } from '../core/suppressions/suppression-service.js';
import type { TeamService } from '../core/teams/team-service.js';
import type { TemplateService } from '../core/templates/template-service.js';
import type { LoginThrottle } from '../core/users/login-throttle.js';
import type { SessionService } from '../core/users/session-service.js';
import type { UserService } from '../core/users/user-service.js';
import type { WebhookEndpointsService } from '../core/webhooks/webhook-endpoints-service.js';
import type { Logger } from '../lib/logger.js';
import type { ConsoleAssets } from './console-assets.js';
import type { ConsoleContext } from './console-context.js';

/** The core services the console is a view over: the same instances the API uses. */
export interface ConsoleServices {
  emails: EmailService;
  deliveries: DeliveryService;
  domains: DomainService;
  apiKeys: ApiKeyService;
  contactBooks: ContactBookService;
  contacts: ContactService;
  contactImports: ContactImportService;
  segments: SegmentService;
  templates: TemplateService;
  campaigns: CampaignService;
  suppressions: SuppressionService;
  webhooks: WebhookEndpointsService;
  analytics: AnalyticsService;
  received: ReceivedEmailService;
  teams: TeamService;
  overview: OverviewService;
  /** Operator pages: the queue (suspend, resume, retry, bounce) and the audit log every change is written to. */
  queue: QueueService;
  audit: AuditService;
}

export interface ConsoleDeps {
  services: ConsoleServices;
  users: UserService;
  sessions: SessionService;
  loginThrottle: LoginThrottle;
  logger: Logger;
  /** POSTHORN_PUBLIC_URL: its origin is accepted on changes, and https makes cookies Secure. */
  publicUrl: string;
  /** Sandbox mode: a domain that has not verified sends too (to the capture mailbox), and the pages say so. */
  sandbox?: boolean;
}

export interface PageDeps extends ConsoleDeps {
  assets: ConsoleAssets;
}

export type Handler = (ctx: ConsoleContext) => Promise<void>;

/** Registers a console handler on the console's router (paths are relative to /console). */
export function route(r: Router, method: 'get' | 'post', path: string, handler: Handler): void {
  r[method](path, handler as never);
}
