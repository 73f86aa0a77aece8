import { z } from 'zod';
import { count, intId, timestamp } from './common-schemas.js';

const nullableText = z.string().nullable();

export const tlsReportListItemSchema = z
  .strictObject({
    id: z.string(),
    domainId: intId,
    organizationName: z.string().meta({ description: 'The reporting organization (RFC 8460 organization-name).' }),
    reportId: z.string().meta({ description: "The reporter's report-id." }),
    contactInfo: nullableText,
    dateRange: z.strictObject({ start: timestamp, end: timestamp }),
    totalSuccessfulSessions: count,
    totalFailureSessions: count,
    mailFrom: z.string().meta({ description: 'Envelope sender of the report mail.' }),
    createdAt: timestamp,
  })
  .meta({ id: 'TlsReportListItem' });

export const tlsReportSchema = tlsReportListItemSchema
  .extend({
    policies: z.array(
      z.strictObject({
        policyType: z.enum(['tlsa', 'sts', 'no-policy-found']),
        policyDomain: z.string(),
        policyString: z.array(z.string()),
        mxHost: z.array(z.string()),
        successfulSessions: count,
        failureSessions: count,
        failureDetails: z.array(
          z.strictObject({
            resultType: z.string().meta({ description: 'RFC 8460 result type, e.g. starttls-not-supported, certificate-expired, sts-policy-fetch-error.' }),
            sendingMtaIp: nullableText,
            receivingMxHostname: nullableText,
            receivingMxHelo: nullableText,
            receivingIp: nullableText,
            failedSessions: count,
            additionalInformation: nullableText,
            failureReasonCode: nullableText,
          }),
        ),
      }),
    ),
  })
  .meta({ id: 'TlsReport' });
