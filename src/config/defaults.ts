import { configSchema, type Config } from './schema.js';

export type { Config };

/** Every key at its default (the schema's defaults, parsed). */
export const DEFAULT_CONFIG: Config = configSchema.parse({});
