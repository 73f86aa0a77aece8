// The layering of docs/architecture.md, checked on every `npm test` (npm run lint:deps):
// edges (api, smtp, cli, scheduler, http-out, console) -> core -> store / render / lib,
// wired together only by the composition root (src/app.ts and its parts in src/composition/),
// and no cycles anywhere.
const EDGES = '^src/(api|smtp|cli|scheduler|http-out|console)/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-cycles', severity: 'error', comment: 'A cycle (even of types) ties modules that should be able to change apart.', from: {}, to: { circular: true } },
    {
      name: 'lib-is-a-leaf',
      severity: 'error',
      comment: 'lib/ holds generic helpers: it knows nothing of the product.',
      from: { path: '^src/lib/' },
      to: { path: '^src/', pathNot: '^src/lib/' },
    },
    {
      name: 'render-is-a-leaf',
      severity: 'error',
      comment: 'render/ turns documents into HTML and text; it may use lib/ only.',
      from: { path: '^src/render/' },
      to: { path: '^src/', pathNot: '^src/(render|lib)/' },
    },
    {
      name: 'store-below-core',
      severity: 'error',
      comment: 'store/ answers queries; policy lives in core/, which calls it, never the other way round.',
      from: { path: '^src/store/' },
      to: { path: '^src/', pathNot: '^src/(store|lib)/' },
    },
    {
      name: 'core-below-edges',
      severity: 'error',
      comment: 'core/ decides; it is called by the edges and gets its configuration passed in.',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/(core|store|render|lib)/' },
    },
    {
      name: 'edges-through-core',
      severity: 'error',
      comment: 'Edges translate a protocol into core calls; only the composition root (src/app.ts) touches the store.',
      from: { path: EDGES },
      to: { path: '^src/store/' },
    },
    {
      name: 'edges-apart',
      severity: 'error',
      comment: 'One edge does not call another; what they share lives in core/.',
      from: { path: '^src/(api|smtp|scheduler|http-out|console)/' },
      to: { path: EDGES, pathNot: '^src/$1/' },
    },
    {
      name: 'one-composition-root',
      severity: 'error',
      comment: 'Only the CLI (the entry point: bin/posthorn runs src/cli) builds the app.',
      from: { pathNot: '^src/(cli/|app\\.ts$)' },
      to: { path: '^src/app\\.ts$' },
    },
    {
      name: 'composition-private',
      severity: 'error',
      comment: 'src/composition/ holds parts of the composition root; only src/app.ts (and each other) use them.',
      from: { pathNot: '^src/(app\\.ts$|composition/)' },
      to: { path: '^src/composition/' },
    },
    {
      name: 'packages-in-their-layer',
      severity: 'error',
      comment: 'kysely, better-sqlite3 and pg stay in store/; koa in api/ and console/; smtp-server in smtp/; commander in cli/.',
      from: { path: '^src/', pathNot: '^src/store/' },
      to: { path: 'node_modules/(kysely|better-sqlite3|pg|pg-[a-z-]+)/' },
    },
    {
      name: 'koa-in-http-edges',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(api|console)/|^src/app\\.ts$' },
      to: { path: 'node_modules/(koa|@koa)/' },
    },
    {
      name: 'smtp-server-in-smtp',
      severity: 'error',
      comment: "nodemailer's address parser is a plain parser core/ may use; its SMTP client is an edge's.",
      from: { path: '^src/', pathNot: '^src/smtp/' },
      to: { path: 'node_modules/(smtp-server|nodemailer)/', pathNot: 'node_modules/nodemailer/.*/addressparser/' },
    },
    {
      name: 'commander-in-cli',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: 'node_modules/commander/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
