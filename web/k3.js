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

  window.Module = {
    canvas: document.getElementById("canvas"),
    print: (t) => console.log(t),
    printErr: (t) => console.warn(t),
    setStatus: (t) => { if (t) status.textContent = t; },
    onAbort: (what) => fail("The explorer stopped: " + what + ". Reload the page to start again."),
    // The canvas keeps its WebGL context when the page is hidden and shown again.
    webglContextAttributes: { antialias: false, alpha: false, preserveDrawingBuffer: false },
  };
  if (typeof WebAssembly !== "object") fail("This browser has no WebAssembly support.");

  window.k3Loaded = function () {
    loading.classList.add("done");
    window.k3.ready = true;
  };

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

  // Test hook for tests/e2e/page.test.mjs: ready, report(), module(), run().
  window.k3 = {
    ready: false,
    report() { return Module.UTF8ToString(Module._k3_report_json()); },
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
    run() {
      return new Promise((resolve) => {
        const tick = () => {
          if (!window.k3.ready) { setTimeout(tick, 20); return; }
          wake();
          if (Module._k3_busy()) setTimeout(tick, 20);
          else resolve(window.k3.report());
        };
        tick();
      });
    },
  };
})();
