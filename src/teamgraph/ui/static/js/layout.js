// Plan graph layout: steps in layers by depth (a step sits one layer below its deepest
// dependency), ordered within a layer by plan order. Pure: ids and edges in, positions out.

/**
 * @param {{id: string, dependsOn: string[]}[]} steps  in plan order
 * @param {{nodeWidth?: number, nodeHeight?: number, gapX?: number, gapY?: number}} size
 */
export function layoutPlan(steps, size = {}) {
  const { nodeWidth = 200, nodeHeight = 64, gapX = 28, gapY = 46 } = size;
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (id) => {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id)) return 0; // a cycle never reaches the UI; stay finite if it does
    visiting.add(id);
    const deps = (byId.get(id)?.dependsOn || []).filter((d) => byId.has(d));
    const d = deps.length ? 1 + Math.max(...deps.map(depthOf)) : 0;
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  const layers = [];
  for (const step of steps) {
    const d = depthOf(step.id);
    (layers[d] ||= []).push(step.id);
  }
  const widest = Math.max(1, ...layers.map((l) => (l ? l.length : 0)));
  const width = widest * nodeWidth + (widest - 1) * gapX;
  const nodes = {};
  layers.forEach((ids, d) => {
    const rowWidth = ids.length * nodeWidth + (ids.length - 1) * gapX;
    const x0 = (width - rowWidth) / 2;
    ids.forEach((id, i) => {
      nodes[id] = { id, layer: d, x: x0 + i * (nodeWidth + gapX), y: d * (nodeHeight + gapY) };
    });
  });
  const edges = [];
  for (const step of steps) {
    for (const dep of step.dependsOn || []) {
      if (nodes[dep]) edges.push({ from: dep, to: step.id });
    }
  }
  const height = layers.length ? layers.length * nodeHeight + (layers.length - 1) * gapY : 0;
  return { nodes, edges, layers, width, height, nodeWidth, nodeHeight };
}
