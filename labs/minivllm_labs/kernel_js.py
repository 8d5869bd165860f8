"""The page side of a lab's live controls: plain HTML + JavaScript that runs Python in the notebook's kernel.

Why not ipywidgets: a widget's output stores a reference to a model that lives only in the kernel that made
it. Save the notebook, restart JupyterLab, reopen it, and every quiz and toggle reads "Error displaying widget:
model not found" (JupyterLab prefers the widget view to any other output of the cell). The labs' controls are
HTML instead, stored in the notebook like any output; when a click needs Python (a toggle re-running the
engine, the quiz recording an answer in the progress file) the page finds the kernel of its notebook through
the Jupyter server's REST API (the session whose path is the notebook's file) and sends an execute request on
its own websocket, so the cell works the same before a run, after a run and after a reopen. Where no server
is around (nbconvert HTML, the book), `mvKernel.run` rejects and the control says the click needs JupyterLab.

`mvKernel.run(notebook, code)` resolves with what the code printed on stdout; an exception in the kernel
rejects with its name and message.
"""

KERNEL_JS = r"""
if (!window.mvKernel) window.mvKernel = (function () {
  var conns = {};
  function config() {
    var el = document.getElementById("jupyter-config-data");
    try { return el ? JSON.parse(el.textContent) : null; } catch (e) { return null; }
  }
  function uid() { return "mv-" + Date.now().toString(36) + Math.random().toString(36).slice(2); }
  function connect(notebook) {
    var c = config();
    if (!c) return Promise.reject(new Error("no Jupyter server here (open the notebook in JupyterLab)"));
    var base = c.baseUrl || "/", token = c.token || "";
    var headers = token ? {Authorization: "token " + token} : {};
    return fetch(base + "api/sessions", {headers: headers, credentials: "same-origin"})
      .then(function (r) { return r.json(); }).then(function (sessions) {
        var s = sessions.filter(function (x) {
          return x.kernel && (x.path === notebook || x.path.slice(-notebook.length - 1) === "/" + notebook);
        })[0];
        if (!s) throw new Error("no kernel is running for " + notebook);
        var id = s.kernel.id;
        if (conns[id] && conns[id].ws.readyState <= 1) return conns[id];
        var session = uid(), url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + base +
          "api/kernels/" + id + "/channels?session_id=" + session + (token ? "&token=" + token : "");
        var conn = {ws: new WebSocket(url), session: session, pending: {}};
        conn.open = new Promise(function (ok, fail) {
          conn.ws.onopen = function () { ok(conn); };
          conn.ws.onerror = function () { fail(new Error("could not reach the kernel")); };
        });
        conn.ws.onmessage = function (ev) {
          var msg; try { msg = JSON.parse(ev.data); } catch (e) { return; }
          var p = conn.pending[(msg.parent_header || {}).msg_id];
          if (!p) return;
          var t = msg.header.msg_type;
          if (t === "stream" && msg.content.name === "stdout") p.out += msg.content.text;
          else if (t === "error") p.err = msg.content.ename + ": " + msg.content.evalue;
          else if (t === "status" && msg.content.execution_state === "idle") {
            delete conn.pending[msg.parent_header.msg_id];
            if (p.err) p.fail(new Error(p.err)); else p.ok(p.out);
          }
        };
        conn.ws.onclose = function () { delete conns[id]; };
        conns[id] = conn;
        return conn.open;
      });
  }
  function run(notebook, code) {
    return connect(notebook).then(function (conn) {
      return conn.open.then(function () {
        return new Promise(function (ok, fail) {
          var id = uid();
          conn.pending[id] = {ok: ok, fail: fail, out: "", err: null};
          conn.ws.send(JSON.stringify({channel: "shell", parent_header: {}, metadata: {}, buffers: [],
            header: {msg_id: id, msg_type: "execute_request", session: conn.session, username: "minivllm",
                     version: "5.3", date: new Date().toISOString()},
            content: {code: code, silent: false, store_history: false, user_expressions: {},
                      allow_stdin: false, stop_on_error: false}}));
        });
      });
    });
  }
  return {run: run};
})();
"""


def notebook_of(lab: str) -> str:
    """The notebook file of a lab ("lab05" -> "05_fallback_ladder.ipynb"), which the page looks its kernel up by."""
    from minivllm_labs.common import REPO_ROOT

    number = lab.removeprefix("lab")
    found = sorted((REPO_ROOT / "labs" / "src").glob(f"{number}_*.py"))
    return f"{found[0].stem}.ipynb" if found else f"{lab}.ipynb"
