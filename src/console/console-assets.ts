import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The console's stylesheet and script are plain files next to its source
// (src/console/assets/), read once at start. They are served under a name carrying their
// hash, so browsers may keep them forever and a new version is a new URL. No bundler and no
// CDN: what the browser runs is exactly these files.

export interface Asset {
  path: string;
  body: Buffer;
  type: string;
}

/** The compiled module lives in dist/src/console/; the files stay in src/console/assets/. */
const ASSET_DIR = fileURLToPath(new URL('../../../src/console/assets/', import.meta.url));

function load(file: string, type: string): Asset {
  const body = readFileSync(ASSET_DIR + file);
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  const dot = file.lastIndexOf('.');
  return { path: `/console/assets/${file.slice(0, dot)}.${hash}${file.slice(dot)}`, body, type };
}

export function loadConsoleAssets() {
  return {
    css: load('console.css', 'text/css; charset=utf-8'),
    js: load('console.js', 'text/javascript; charset=utf-8'),
    icon: load('icon.svg', 'image/svg+xml'),
  };
}
export type ConsoleAssets = ReturnType<typeof loadConsoleAssets>;
