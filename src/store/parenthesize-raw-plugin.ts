import {
  OperationNodeTransformer,
  ParensNode,
  RawNode,
  type AndNode,
  type KyselyPlugin,
  type OperationNode,
  type OrNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnaryOperationNode,
  type UnknownRow,
} from 'kysely';

/*
 * Kysely joins `.where(a).where(b)` as `a and b` and prints a raw `sql` fragment as it is, so
 * `.where('team_id', '=', t).where(sql`x or y`)` reads `team_id = ? and x or y`: the OR escapes
 * the team scope and the query reads every tenant's rows. This plugin puts every raw fragment
 * that is an operand of AND, OR or NOT in parentheses, on every query the store builds, so that
 * mistake cannot be made: a scope condition always binds as tightly as it reads.
 */
class ParenthesizeRawOperands extends OperationNodeTransformer {
  private wrap(node: OperationNode): OperationNode {
    return RawNode.is(node) ? ParensNode.create(node) : node;
  }

  protected override transformAnd(node: AndNode): AndNode {
    const out = super.transformAnd(node);
    return { ...out, left: this.wrap(out.left), right: this.wrap(out.right) };
  }

  protected override transformOr(node: OrNode): OrNode {
    const out = super.transformOr(node);
    return { ...out, left: this.wrap(out.left), right: this.wrap(out.right) };
  }

  protected override transformUnaryOperation(node: UnaryOperationNode): UnaryOperationNode {
    const out = super.transformUnaryOperation(node);
    return { ...out, operand: this.wrap(out.operand) };
  }
}

export class ParenthesizeRawPlugin implements KyselyPlugin {
  private readonly transformer = new ParenthesizeRawOperands();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return this.transformer.transformNode(args.node, args.queryId);
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}
