/*
 * Node options `posthorn serve` runs with (npm start, the systemd unit; the bench too). V8 sizes
 * the heap against its maximum, which on a large machine defaults to gigabytes: under a steady
 * stream of sends it then lets garbage pile up to ~200 MB before it collects. With an explicit
 * maximum the same load keeps the heap at ~100 MB (resident ~250 MB for 10,000 messages in
 * flight instead of ~375), at no measurable CPU (docs/benchmarks.md). 512 MB leaves room for
 * several bodies at the 40 MB limit at once.
 */
export const SERVER_NODE_FLAGS = ['--max-old-space-size=512'] as const;
