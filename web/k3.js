// Glue between the page and the WebAssembly app: loading state, waking the render loop on input
// (the app pauses it when idle), URL hash changes, and the test hook window.k3.
"use strict";

(function () {
  const loading = document.getElementById("loading");
  const status = document.getElementById("status");

  function fail(text) {
    loading.classList.add("error");
    status.textContent = text;
  }

  // The WebAssembly stopped after the page was up (out of memory, an abort, an uncaught error): the
  // instance cannot go on, so the page says what ran and why, keeps the last frame visible under the
  // message, and offers a restart on the last result (the message then shows as a banner there).
  let crashed = false;
  function stopped(what) {
    if (crashed) return;
    crashed = true;
    const k3 = window.k3;
    if (!k3.ready) { fail("The explorer stopped while loading: " + (what || "no reason given") + ". Reload the page to try again."); return; }
    k3.ready = false;
    const during = k3.running ? " while running " + k3.running : "";
    const mib = (b) => Math.round(b / 1048576).toLocaleString("en-US") + " MiB";
    const text = k3.outOfMemory
      ? `The explorer ran out of memory${during}: its WebAssembly memory had grown to ${mib(k3.outOfMemory.heap)} ` +
        `(the page's limit is ${mib(k3.outOfMemory.max)}) and the run needed more.`
      : `The explorer stopped${during}: ${what || "the WebAssembly code aborted without giving a reason"}.`;
    document.getElementById("crash-text").textContent = text;
    const back = document.getElementById("crash-back");
    back.hidden = !k3.resultLink;
    const restart = (hash) => {
      sessionStorage.setItem("k3-restart-note", "The page restarted. " + text);
      history.replaceState(null, "", window.location.pathname + hash);
      window.location.reload();
    };
    back.onclick = () => restart(k3.resultLink);
    document.getElementById("crash-overview").onclick = () => restart("");
    document.getElementById("crash").hidden = false;
    (k3.resultLink ? back : document.getElementById("crash-overview")).focus();
  }

  window.Module = {
    canvas: document.getElementById("canvas"),
    print: (t) => console.log(t),
    printErr: (t) => console.warn(t),
    setStatus: (t) => { if (t) status.textContent = t; },
    onAbort: (what) => stopped(what),
    // The canvas keeps its WebGL context when the page is hidden and shown again.
    webglContextAttributes: { antialias: false, alpha: false, preserveDrawingBuffer: false },
  };
  if (typeof WebAssembly !== "object") fail("This browser has no WebAssembly support.");

  // An uncaught error from the WebAssembly or its glue (a call the build does not support, say) stops the
  // instance as surely as an abort; errors from elsewhere are not ours to report.
  window.addEventListener("error", (e) => {
    if (e.error instanceof WebAssembly.RuntimeError || /k3explorer\.(js|wasm)/.test(e.filename || ""))
      stopped(String(e.message || e.error));
  });

  window.k3Loaded = function () {
    loading.classList.add("done");
    window.k3.ready = true;
    window.k3.firstFrameMs = performance.now();  // since the navigation started
    const note = sessionStorage.getItem("k3-restart-note");
    if (note) {
      sessionStorage.removeItem("k3-restart-note");
      Module.ccall("k3_notice", null, ["string"], [note]);
    }
  };

  // Imports (ui/import.cpp): a file picked with the Import button or dropped on the page goes to the
  // app as its name and bytes; the app says what it did or why it refused the file.
  function importFile(file) {
    file.arrayBuffer().then((buf) => {
      if (!window.k3.ready) return;
      const bytes = new Uint8Array(buf);
      const data = Module._malloc(Math.max(1, bytes.length));
      Module.HEAPU8.set(bytes, data);
      Module.ccall("k3_import", null, ["string", "number", "number"], [file.name, data, bytes.length]);
      Module._free(data);
    });
  }
  const picker = document.getElementById("k3-import");
  picker.addEventListener("change", () => {
    if (picker.files.length) importFile(picker.files[0]);
    picker.value = "";
  });
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => {
    e.preventDefault();
    if (e.dataTransfer && e.dataTransfer.files.length) importFile(e.dataTransfer.files[0]);
  });

  function wake() {
    if (window.k3.ready && Module._k3_wake) Module._k3_wake();
  }
  for (const ev of ["mousemove", "mousedown", "mouseup", "wheel", "keydown", "keyup", "touchstart", "touchmove",
                    "touchend", "resize", "focus", "blur", "paste"]) {
    window.addEventListener(ev, wake, { capture: true, passive: true });
  }
  document.addEventListener("visibilitychange", wake);
  window.addEventListener("hashchange", () => { if (window.k3.ready) Module._k3_hash_changed(); });
  window.addEventListener("webglcontextlost", (e) => {
    e.preventDefault();
    fail("The browser dropped the WebGL context. Reload the page to continue.");
  }, true);

  // Resolves once `idle()` holds and a frame has been drawn since it began to (waking the page, which
  // draws no frames while nothing changes).
  function frameAfter(idle) {
    return new Promise((resolve) => {
      let drawn = -1;
      const tick = () => {
        if (!window.k3.ready) { setTimeout(tick, 20); return; }
        wake();
        if (!idle()) drawn = -1;
        else if (drawn < 0) drawn = Module._k3_frame_count();
        else if (Module._k3_frame_count() > drawn) { resolve(); return; }
        setTimeout(tick, 20);
      };
      tick();
    });
  }

  // Test hook for tests/e2e/page.test.mjs: ready, report(), module(), run(); running and resultLink
  // come from the app (ui/platform_web.cpp).
  window.k3 = {
    ready: false,
    report() { return Module.UTF8ToString(Module._k3_report_json()); },
    // The pinned baseline's report for the module on screen ("" when none).
    baseline() { return Module.UTF8ToString(Module._k3_baseline_json()); },
    module() { return Module.UTF8ToString(Module._k3_module_id()); },
    // More test helpers: where a parameter's widget is (CSS pixels), frames drawn.
    widget(key) {
      const p = Module._malloc(key.length * 4 + 1);
      Module.stringToUTF8(key, p, key.length * 4 + 1);
      const s = Module.UTF8ToString(Module._k3_widget_rect(p));
      Module._free(p);
      if (!s) return null;
      const d = window.devicePixelRatio || 1;
      const [x, y, w, h] = s.split(",").map(Number);
      return { x: x / d, y: y / d, w: w / d, h: h / d };
    },
    frames() { return Module._k3_frame_count(); },
    // {module, busy, report, stale, messages}: the problems and refusals the last frame showed.
    state() { return JSON.parse(Module.UTF8ToString(Module._k3_view_state())); },
    // The message shown if the WebAssembly stopped ("" while it runs).
    stopped() { return crashed ? document.getElementById("crash-text").textContent : ""; },
    // Resolves once a frame has been drawn after the call (state() then describes what is on screen),
    // whether a run goes on or not.
    drawn() { return frameAfter(() => true); },
    // Resolves with the report once nothing runs and a frame has been drawn since.
    run() { return frameAfter(() => !Module._k3_busy()).then(() => window.k3.report()); },
  };
})();
