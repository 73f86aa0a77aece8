import {
  ColumnDefinitionNode,
  CreateTableNode,
  DataTypeNode,
  OperationNodeTransformer,
  RawNode,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely';

/*
 * The migrations are written once, with Kysely's schema builder, in SQLite's vocabulary. On
 * PostgreSQL this plugin maps their column types so the same files make the equivalent schema:
 *
 * - integer -> bigint: SQLite integers are 64-bit, and due times are epoch milliseconds, far past
 *   PostgreSQL's 32-bit integer.
 * - integer primary key autoincrement -> bigserial primary key.
 * - blob -> bytea.
 * - text -> text collate "C": SQLite compares and sorts text by bytes (BINARY); the C collation
 *   does the same, so ordering, cursors and unique keys behave alike on both engines.
 *
 * - SQLite's implicit rowid: a few tables' queries break ties of one instant by insertion order
 *   (`order by created_at desc, rowid desc`); PostgreSQL gets an explicit rowid column there
 *   (bigserial), so those queries run unchanged and `store copy` carries the order over.
 *
 * Raw `sql` statements in migrations are not touched: they are written to run on both.
 */

/** Tables whose queries use rowid (an insertion order). */
const ROWID_TABLES = new Set(['contacts', 'contact_books', 'segments', 'sandbox_messages', 'campaign_recipients']);
class PgColumnTypes extends OperationNodeTransformer {
  protected override transformCreateTable(node: CreateTableNode): CreateTableNode {
    const out = super.transformCreateTable(node);
    if (!ROWID_TABLES.has(out.table.table.identifier.name)) return out;
    const rowid = ColumnDefinitionNode.cloneWith(ColumnDefinitionNode.create('rowid', DataTypeNode.create('bigserial' as never)), { notNull: true });
    return CreateTableNode.cloneWithColumn(out, rowid);
  }

  protected override transformColumnDefinition(node: ColumnDefinitionNode): ColumnDefinitionNode {
    const out = super.transformColumnDefinition(node);
    const type = DataTypeNode.is(out.dataType) ? out.dataType.dataType : undefined;
    if (out.autoIncrement) return ColumnDefinitionNode.cloneWith({ ...out, dataType: DataTypeNode.create('bigserial' as never) }, { autoIncrement: false });
    const mapped = mapType(type);
    return mapped ? { ...out, dataType: mapped } : out;
  }
}

function mapType(type: string | undefined): OperationNode | undefined {
  switch (type) {
    case 'integer':
      return DataTypeNode.create('bigint');
    case 'blob':
      return DataTypeNode.create('bytea');
    case 'text':
      return RawNode.createWithSql('text collate "C"');
    default:
      return undefined;
  }
}

export class PgSchemaPlugin implements KyselyPlugin {
  private readonly transformer = new PgColumnTypes();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    const kind = args.node.kind;
    if (kind !== 'CreateTableNode' && kind !== 'AlterTableNode') return args.node;
    return this.transformer.transformNode(args.node, args.queryId);
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}
