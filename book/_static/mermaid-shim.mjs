// sphinxcontrib-mermaid imports mermaid as an ES module; the vendored mermaid.min.js is a classic script
// (loaded first from html_js_files) that sets globalThis.mermaid. This module hands that object over.
export default globalThis.mermaid;
