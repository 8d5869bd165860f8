// sphinxcontrib-mermaid imports mermaid as an ES module; the vendored mermaid.min.js is a classic script
// (written at the top of the pages that draw a flowchart) that sets globalThis.mermaid. This module hands
// that object over. sphinxcontrib-mermaid also adds its module to a few pages written after a flowchart
// page (search, index); there mermaid.min.js is absent and a no-op stands in, so nothing fails.
const noop = { initialize() {}, run() { return Promise.resolve(); }, registerLayoutLoaders() {},
  registerIconPacks() {}, registerExternalDiagrams() { return Promise.resolve(); } };
export default globalThis.mermaid || noop;
