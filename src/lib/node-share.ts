/**
 * A node's share of a limit meant for the whole cluster, when the limit is kept in each node's
 * memory: the limit divided by the live nodes, rounded down so the nodes together stay within
 * it, and never below 1 so every node can still work (with more nodes than the limit, the
 * cluster's total is one per node). One node (SQLite, or a cluster of one): the limit itself.
 * An uncapped limit (Infinity) stays uncapped.
 */
export function nodeShare(limit: number, liveNodes: number): number {
  if (liveNodes <= 1) return limit;
  return Math.max(1, Math.floor(limit / liveNodes));
}
