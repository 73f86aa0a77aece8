import { z } from 'zod';
import { intId, timestamp } from './common-schemas.js';

export const DOMAIN_STATUSES = ['NOT_STARTED', 'PENDING', 'SUCCESS', 'FAILED', 'TEMPORARY_FAILURE'] as const;
const domainStatus = z.enum(DOMAIN_STATUSES);

export const dnsRecordSchema = z
  .strictObject({
    type: z.enum(['MX', 'TXT', 'CNAME']),
    name: z.string(),
    value: z.string(),
    ttl: z.string(),
    priority: z.string().nullable(),
    status: domainStatus,
    recommended: z.boolean().meta({ description: 'Recommended rather than required (DMARC).' }),
  })
  .meta({ id: 'DnsRecord' });

export const domainSchema = z
  .strictObject({
    id: intId,
    name: z.string(),
    teamId: intId,
    status: domainStatus,
    region: z.string(),
    clickTracking: z.boolean(),
    openTracking: z.boolean(),
    trackingDomain: z.string().nullable().meta({ description: 'Host of tracked links; null means the shared redirect host.' }),
    trackingDomainStatus: domainStatus.nullable(),
    tlsPolicy: z.enum(['OPPORTUNISTIC', 'ENFORCED']),
    receiving: z.boolean().meta({ description: 'Whether mail addressed to the domain is accepted (its MX is then in dnsRecords).' }),
    mtaStsMode: z.enum(['enforce', 'testing', 'none']).meta({
      description: 'The MTA-STS mode (RFC 8461) Posthorn serves for the domain when receiving: testing (the default) asks senders to report, enforce to require TLS to this server, none withdraws the policy.',
    }),
    publicKey: z.string(),
    dkimStatus: domainStatus.nullable(),
    spfDetails: domainStatus.nullable(),
    createdAt: timestamp,
    updatedAt: timestamp,
    dmarcAdded: z.boolean(),
    isVerifying: z.boolean(),
    errorMessage: z.string().nullable(),
    subdomain: z.string().nullable(),
    verificationError: z.string().nullable(),
    lastCheckedTime: timestamp.nullable(),
    dnsRecords: z.array(dnsRecordSchema),
  })
  .meta({ id: 'Domain' });

export const domainVerifySchema = z.strictObject({ message: z.string() });
