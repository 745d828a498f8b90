// Browser test of the web explorer: Debian's chromium (headless) driven by playwright-core.
// Usage: node tests/e2e/page.test.mjs WEB_DIR K3CLI
// Checks: the page loads with no console errors and a non-blank canvas; every module opened by
// URL reports exactly what `k3cli run` reports for the same parameters (timing aside); a moved
// slider changes the result and the link; bad and hostile links are reported, never fatal; a refusal
// keeps the last result; running out of memory is named and the page restarts on the last result; an
// idle page stops drawing. Screenshots go to build/e2e/.
import { chromium } from "playwright-core";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { decodePng, contentStats } from "./png.mjs";
import { rooflineFractions, plausible, kRooflineTables } from "../cli/roofline_fractions.mjs";

const [webDir, k3cli] = process.argv.slice(2);
if (!webDir || !k3cli) { console.error("usage: page.test.mjs WEB_DIR K3CLI"); process.exit(2); }
const outDir = "build/e2e";
fs.mkdirSync(outDir, { recursive: true });

let failures = 0;
const ok = (cond, what) => { console.log(`${cond ? "ok  " : "FAIL"} ${what}`); if (!cond) failures++; };

function cli(args) {
  return JSON.parse(execFileSync(k3cli, ["run", ...args, "--json"], { encoding: "utf8", maxBuffer: 1 << 28 }));
}
function strip(r) { const c = structuredClone(r); delete c.timing; return c; }
function firstDiff(a, b) {
  const sa = JSON.stringify(a), sb = JSON.stringify(b);
  for (let i = 0; i < Math.max(sa.length, sb.length); ++i)
    if (sa[i] !== sb[i]) return `page …${sa.slice(Math.max(0, i - 60), i + 40)}…\n      cli  …${sb.slice(Math.max(0, i - 60), i + 40)}…`;
  return "";
}

// ---- server ----
const server = spawn(process.execPath, ["scripts/serve.mjs", webDir, "0"], { stdio: ["ignore", "pipe", "inherit"] });
const base = await new Promise((resolve, reject) => {
  server.stdout.on("data", (d) => { const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(String(d)); if (m) resolve(m[0]); });
  server.on("exit", () => reject(new Error("server exited")));
  setTimeout(() => reject(new Error("server did not start")), 10000);
});

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const problems = [];
page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
page.on("request", (r) => { if (!r.url().startsWith(base) && !r.url().startsWith("data:")) problems.push(`external request: ${r.url()}`); });

async function open(hash) {
  await page.goto("about:blank");
  await page.goto(base + hash);
  await page.waitForFunction(() => window.k3 && window.k3.ready, null, { timeout: 30000 });
  // When the page drew its first frame, by the page's clock (the test's polling waits for the page).
  const firstFrameMs = Math.round(await page.evaluate(() => window.k3.firstFrameMs));
  const text = await page.evaluate(() => window.k3.run());
  return { report: text ? JSON.parse(text) : null, firstFrameMs };
}

// Follows a link on the page already open (a hash change, no reload); resolves with the report once
// nothing runs and a frame has been drawn (null: no report).
async function follow(hash) {
  const text = await page.evaluate(async (h) => {
    const changed = new Promise((r) => window.addEventListener("hashchange", r, { once: true }));
    window.location.hash = h;
    await changed;
    return window.k3.run();
  }, hash);
  return text ? JSON.parse(text) : null;
}

// One hostile link (section 4): opened, then judged once the page is ready and has drawn a frame.
async function hostile(c) {
  const label = c.hash.length > 70 ? c.hash.slice(0, 67) + "..." : c.hash;
  const t0 = Date.now();
  if (c.follow) {
    await page.evaluate((h) => {
      const changed = new Promise((r) => window.addEventListener("hashchange", r, { once: true }));
      window.location.hash = h;
      return changed;
    }, c.hash);
  } else {
    await page.goto("about:blank");
    await page.goto(base + c.hash);
  }
  await page.waitForFunction(() => window.k3 && window.k3.ready, null, { timeout: 30000 });
  await page.evaluate(() => window.k3.drawn());
  const st = await page.evaluate(() => window.k3.state());
  const text = st.messages.join("\n");
  ok(st.module === c.module && c.message.test(text),
     `hostile link ${label}: ready on ${st.module} in ${Date.now() - t0} ms, shows ${c.message}`);
  if (!c.message.test(text)) console.log("     shown: " + JSON.stringify(st.messages).slice(0, 400));
  if (c.applied === false) ok(/none of it was applied/.test(text), "  ... and says none of it was applied");
  if (c.report === false) ok(!st.report && !st.busy, "  ... and runs nothing");
  const shown = await page.evaluate(() => window.location.hash);
  if (c.applies) ok(c.applies.test(shown), `  ... and applies ${shown}`);
  if (c.shot) await page.screenshot({ path: path.join(outDir, `${c.shot}.png`) });
}

// Issue 19: module 1 measures the machine the page runs on and puts every kernel and the runnable model
// on its roofline, each with the limit that binds it and the fraction it reaches.
function deviceRoofline(timing) {
  const v = (k) => (timing[k] ? timing[k].value : 0);
  ok(v("device_mul_add_flops") > 0 && v("device_rmw_L2") > 0 && v("device_rmw_memory") > 0 && v("device_read_weights") > 0,
     `the page measured this machine: ${(v("device_mul_add_flops") / 1e9).toFixed(1)} Gflop/s multiply+add, ` +
     `${(v("device_rmw_memory") / 1e9).toFixed(1)} GB/s memory read-modify-write`);
  const [kernels, model] = kRooflineTables.map((n) => rooflineFractions(timing).find((t) => t.name.startsWith(n)));
  const shown = (t) => (t ? t.fractions.map((f) => (100 * f).toFixed(0) + " %").join(", ") : "none");
  ok(kernels && kernels.fractions.length === 7 && plausible(kernels.fractions),
     `each kernel's fraction of its limit on the page: ${shown(kernels)}`);
  ok(model && model.fractions.length === 2 && plausible(model.fractions),
     `the runnable model's prefill and decode on the page: ${shown(model)}`);
}

// Opens a kda link afresh and waits until its run is in the fp32 kernels or it is refused.
async function openKda(hash) {
  const t0 = Date.now();
  await page.goto("about:blank");
  await page.goto(base + hash);
  await page.waitForFunction(() => window.k3 && window.k3.ready, null, { timeout: 30000 });
  const ready = Date.now() - t0;
  await page.waitForFunction(() => window.k3.state().stage === "fp32 kernels" ||
                                   window.k3.state().messages.some((m) => /^Not run:/.test(m)),
                             null, { timeout: 60000, polling: 100 });
  return { ...(await page.evaluate(() => window.k3.state())), ready, at: Date.now() - t0 };
}

// A run in the fp32 kernels (one step ran them all once, minutes for the link that froze the page) is
// sliced: the page still draws, and a new link opens at once.
async function yieldsInKernels(what, st) {
  const f0 = await page.evaluate(() => window.k3.frames());
  await page.waitForTimeout(1000);
  await page.mouse.move(300, 300);
  const f1 = await page.evaluate(() => window.k3.frames());
  const t0 = Date.now();
  await page.evaluate(() => { window.location.hash = "#m=memory"; });
  await page.waitForFunction(() => window.k3.module() === "memory" && window.k3.state().report, null, { timeout: 10000 });
  ok(f1 - f0 >= 3, `${what}: ready after ${st.ready} ms, in its fp32 kernels after ${st.at} ms, ` +
     `${f1 - f0} frames drawn in 1 s of them, another link opened ${Date.now() - t0} ms later`);
}

// The kda link that froze the page: refused up front (its estimate is past the run limit), or sliced.
// When it is refused, a long run the limit accepts shows the slicing.
async function kdaFreezeLink() {
  const st = await openKda("#m=kda&heads=1&group=8&k=256&v=32&tokens=8192&chunk=1024");
  if (st.busy) return yieldsInKernels("kda freeze link", st);
  ok(!st.report && st.messages.some((m) => /^Not run: the run would take about/.test(m)),
     `kda freeze link: refused after ${st.ready} ms: ${st.messages.join(" ").slice(0, 100)}...`);
  const long = await openKda("#m=kda&heads=4&tokens=4096");
  ok(long.busy, "a long kda run (heads=4, tokens=4096) is accepted");
  if (long.busy) await yieldsInKernels("a long kda run", long);
}

try {
  // 1. The Overview loads, draws, and shows no errors.
  const { firstFrameMs } = await open("");
  ok(await page.evaluate(() => window.k3.module()) === "overview", "page opens on the Overview");
  const shot = await page.screenshot({ path: path.join(outDir, "overview.png") });
  const st = contentStats(decodePng(shot));
  ok(st.nonBackground > 0.03 && st.colours > 20, `canvas is not blank (${(st.nonBackground * 100).toFixed(1)} % drawn, ${st.colours} colours)`);
  ok(firstFrameMs <= 1500, `first frame after ${firstFrameMs} ms (target: within 1.5 s)`);
  const size = fs.readdirSync(webDir).filter((f) => /\.(js|wasm)$/.test(f))
    .reduce((s, f) => s + fs.statSync(path.join(webDir, f)).size, 0);
  // Issue 18's weight: the fonts are cut down to the glyphs the UI draws (ui/CMakeLists.txt).
  ok(size < 2.5 * 1024 * 1024, `.js + .wasm ${(size / 1024).toFixed(0)} KiB (under 2.5 MiB)`);
  // scripts/serve.mjs (what `scripts/k3 serve` runs) sends them compressed to a browser that accepts gzip.
  let wire = 0, allGzip = true;
  for (const f of ["k3explorer.js", "k3explorer.wasm"]) {
    const res = await fetch(base + f, { headers: { "Accept-Encoding": "gzip" } });
    allGzip &&= res.headers.get("content-encoding") === "gzip";
    wire += Number(res.headers.get("content-length"));
    await res.arrayBuffer();
  }
  ok(allGzip && wire < size / 2, `served gzip-compressed: ${(wire / 1024).toFixed(0)} KiB on the wire`);

  // 2. Every module opened by URL: the report equals the CLI's for the same parameters.
  const mods = JSON.parse(execFileSync(k3cli, ["list", "--json"], { encoding: "utf8" })).modules.map((m) => m.id);
  const extra = { memory: ["preset=qwen3-next-80b", "context=1048576", "budget_gib=80"] };
  for (const id of mods) {
    const args = extra[id] || [];
    const { report } = await open(`#m=${id}&${args.join("&")}`);
    const want = cli([id, ...args]);
    ok(report && report.module === id, `#m=${id} opens module ${id}`);
    if (!report) continue;
    const same = JSON.stringify(strip(report)) === JSON.stringify(strip(want));
    ok(same, `${id}: page report equals k3cli run ${id} ${args.join(" ")} (timing aside)`);
    if (!same) console.log("     " + firstDiff(strip(report), strip(want)));
    ok(report.checks.every((c) => c.passed), `${id}: all ${report.checks.length} checks pass in the browser`);
    if (id === "kda") deviceRoofline(report.timing);
    await page.screenshot({ path: path.join(outDir, `${id}.png`) });
  }

  // 2b. A run that needs a data file: the page fetches the bundled trace from its own server.
  {
    const args = ["trace=mooncake", "sweeps=0"];
    const { report } = await open(`#m=checkpoints&${args.join("&")}`);
    const want = cli(["checkpoints", ...args]);
    ok(report && JSON.stringify(strip(report)) === JSON.stringify(strip(want)),
       "checkpoints on the bundled Mooncake trace: page report equals the CLI's (trace fetched by the page)");
    if (report) ok(Math.abs(report.scalars.token_hit_kv.value - 0.3736) < 5e-5, `Mooncake KV-visible hit ${report.scalars.token_hit_kv.value}`);
  }

  // 3. Moving a slider changes the result and the link.
  {
    const { report: before } = await open("#m=memory");
    const r = await page.evaluate(() => window.k3.widget("context"));
    ok(r !== null, "the context slider is on the page");
    if (r) {
      const y = r.y + r.h / 2;
      await page.mouse.move(r.x + r.w * 0.5, y);
      await page.mouse.down();
      await page.mouse.move(r.x + r.w * 0.2, y, { steps: 8 });
      await page.mouse.up();
      const after = JSON.parse(await page.evaluate(() => window.k3.run()));
      const c0 = before.params.context, c1 = after.params.context;
      ok(c1 !== c0 && after.scalars.total_bytes.value !== before.scalars.total_bytes.value,
         `dragging the context slider changed context ${c0} -> ${c1} and total_bytes`);
      const hash = await page.evaluate(() => window.location.hash);
      ok(hash.includes(`context=${c1}`), `the link follows the slider (${hash})`);
      const again = await open(hash);
      ok(JSON.stringify(strip(again.report)) === JSON.stringify(strip(after)), "the copied link restores the same report");
    }
  }

  // 3a. A check's tooltip says what makes it fail (its falsifier): the row's tooltip appears on hover.
  {
    await open("#m=memory");
    // The checks are one line ("17 of 17 checks pass") that opens the list.
    const line = await page.evaluate(() => window.k3.widget("checks"));
    ok(line !== null, "the checks line is on the page");
    if (line) await page.mouse.click(line.x + 40, line.y + line.h / 2);
    await page.evaluate(() => window.k3.drawn());
    const r = await page.evaluate(() => window.k3.widget("check:accounting_equals_tensor_recount"));
    ok(r !== null, "the memory module's recount check is on the page");
    if (r) {
      const box = { x: r.x, y: r.y + r.h, width: Math.min(600, 1280 - r.x), height: Math.min(160, 800 - r.y - r.h) };
      const before = decodePng(await page.screenshot({ clip: box }));
      await page.mouse.move(r.x + 160, r.y + r.h / 2);
      await page.waitForTimeout(400);
      const after = decodePng(await page.screenshot({ clip: box }));
      await page.screenshot({ path: path.join(outDir, "check-tooltip.png") });
      let changed = 0;
      for (let i = 0; i < before.rgba.length; i += 4) changed += before.rgba[i] !== after.rgba[i];
      ok(changed > before.rgba.length / 4 * 0.05, `hovering a check opens its tooltip (${changed} pixels changed; build/e2e/check-tooltip.png)`);
      await page.mouse.move(5, 790);
    }
  }

  // 3d. The picture first: each module's main view (its pool map, timeline, curve) starts in the first
  // screen at 1280x800, with at least 200 pixels of it (or all of it) showing.
  for (const hash of ["#m=pool", "#m=memory", "#m=fleet", "#m=checkpoints&trace=synthetic"]) {
    await open(hash);
    const v = await page.evaluate(() => window.k3.widget("main_view"));
    const shown = v ? Math.min(v.h, 800 - v.y) : 0;
    ok(v !== null && shown >= Math.min(v.h, 200),
       `${hash}: the main view starts ${v ? Math.round(v.y) : "?"} px down, ${Math.round(shown)} px of it in the first screen`);
  }
  await page.screenshot({ path: path.join(outDir, "first-screen.png") });

  // 3e. Compare: pin a run, change a parameter, see both; the link restores both.
  {
    const { report: pinned } = await open("#m=memory&context=65536");
    const pin = await page.evaluate(() => window.k3.widget("pin"));
    ok(pin !== null, "the Pin button is on the page");
    if (pin) {
      await page.mouse.click(pin.x + pin.w / 2, pin.y + pin.h / 2);
      await page.evaluate(() => window.k3.drawn());
      const st = await page.evaluate(() => window.k3.state());
      ok(st.pinned === "memory" && st.baseline, `pinning makes the run the baseline (${JSON.stringify([st.pinned, st.baseline])})`);
      await page.evaluate(() => { window.location.hash = window.location.hash.replace("context=65536", "context=1048576"); });
      const now = JSON.parse(await page.evaluate(() => window.k3.run()));
      const base = JSON.parse(await page.evaluate(() => window.k3.baseline()) || "null");
      ok(now.params.context === 1048576 && base && JSON.stringify(strip(base)) === JSON.stringify(strip(pinned)),
         "after a change the page holds the new run and the pinned one as its baseline");
      await page.screenshot({ path: path.join(outDir, "compare.png") });
      for (const [key, check] of [["export_json", (t) => { const j = JSON.parse(t); return j.report && j.baseline && j.baseline.params.context === 65536; }],
                                  ["export_csv", (t) => /baseline/.test(t) && t.includes("state_bytes")]]) {
        const r = await page.evaluate((k) => window.k3.widget(k), key);
        if (!r) { ok(false, `${key} button on the page`); continue; }
        const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }),
                                        page.mouse.click(r.x + r.w / 2, r.y + r.h / 2)]);
        ok(check(fs.readFileSync(await dl.path(), "utf8")), `${key} in compare mode holds both reports`);
      }
      const link = await page.evaluate(() => window.location.hash);
      ok(/pin=memory/.test(link) && /pin\.context=65536/.test(link), `the link holds both parameter sets (${link})`);
      const again = await open(link);
      const restored = JSON.parse(await page.evaluate(() => window.k3.baseline()) || "null");
      ok(JSON.stringify(strip(again.report)) === JSON.stringify(strip(now)) && restored &&
         JSON.stringify(strip(restored)) === JSON.stringify(strip(pinned)), "the link restores both runs");
      const cross = await open("#m=faults&pin=fleet&pin.seed=7");
      const fb = JSON.parse(await page.evaluate(() => window.k3.baseline()) || "null");
      ok(fb && fb.module === "faults" && fb.params.seed === 7 && cross.report.params.seed !== 7,
         "a baseline pinned in fleet runs with its settings in faults (the modules share a parameter set)");
    }
  }

  // 3f. Bring your own data through the Import button (a real <input type="file">): a trace runs the open
  // module on it, as the CLI runs the same file; a config.json becomes module 2's custom model with the
  // matching preset's figures; a report becomes the baseline; a broken file is refused and changes nothing.
  {
    const importFile = async (file) => {
      const before = await page.evaluate(() => window.k3.frames());
      await page.setInputFiles("#k3-import", file);
      await page.waitForFunction((f) => window.k3.frames() > f, before, { timeout: 10000 });
      return JSON.parse(await page.evaluate(() => window.k3.run()) || "null");
    };
    const trace = "tests/data/traces/mooncake_conversation_trace.jsonl";
    const small = path.join(outDir, "imported_trace.jsonl");
    fs.writeFileSync(small, fs.readFileSync(trace, "utf8").split("\n").slice(0, 400).join("\n") + "\n");
    await open("#m=checkpoints&sweeps=0");
    const got = await importFile(small);
    const want = cli(["checkpoints", `trace=${small}`, "sweeps=0"]);
    const sameRun = (r) => { const c = strip(r); delete c.params.trace; return JSON.stringify(c); };
    ok(got && got.params.trace === "imported:imported_trace.jsonl" && sameRun(got) === sameRun(want),
       `an imported trace runs the open module as the CLI runs the file (${got && got.params.trace})`);
    if (got && sameRun(got) !== sameRun(want)) console.log("     " + firstDiff(strip(got), strip(want)));

    await open("#m=memory");
    const custom = await importFile("tests/data/configs/Kimi-Linear-48B-A3B-Instruct.config.json");
    const preset = cli(["memory", "preset=kimi-linear-48b"]);
    const figures = (r) => JSON.stringify(Object.fromEntries(Object.entries(r.scalars).map(([k, v]) => [k, v.value])));
    ok(custom && custom.params.preset === "custom" && figures(custom) === figures(preset),
       "an imported config.json is module 2's custom model with the figures of the matching preset");

    // The same file dropped on the page (a drop event carrying it, as a drag from the desktop does).
    await open("#m=kda");
    const configText = fs.readFileSync("tests/data/configs/Kimi-Linear-48B-A3B-Instruct.config.json", "utf8");
    await page.evaluate((text) => {
      const dt = new DataTransfer();
      dt.items.add(new File([text], "config.json", { type: "application/json" }));
      window.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, configText);
    await page.waitForFunction(() => window.k3.module() === "memory", null, { timeout: 10000 });
    const dropped = JSON.parse(await page.evaluate(() => window.k3.run()) || "null");
    ok(dropped && figures(dropped) === figures(preset), "a config.json dropped on the page opens the same custom model");

    const exported = path.join(outDir, "exported_report.json");
    fs.writeFileSync(exported, JSON.stringify(preset));
    await importFile(exported);
    const st = await page.evaluate(() => window.k3.state());
    ok(st.pinned === "memory" && st.baseline, "an imported report becomes the baseline to compare with");

    const broken = path.join(outDir, "broken.json");
    fs.writeFileSync(broken, '{"model_type": "kimi_linear",\n  "num_hidden_layers": 27,\n  "linear_attn_config": [}');
    const hashBefore = await page.evaluate(() => window.location.hash);
    await importFile(broken);
    const refused = await page.evaluate(() => window.k3.state());
    ok(refused.messages.some((m) => /^Import refused, nothing was changed\. broken\.json: line 3/.test(m)) &&
       await page.evaluate(() => window.location.hash) === hashBefore,
       `a broken file is refused with the line, and nothing changes (${refused.messages.join(" ").slice(0, 120)})`);
    await page.screenshot({ path: path.join(outDir, "import-refused.png") });
  }

  // 3b. Exports: the JSON download is the report, the CSV has the scalars.
  {
    const { report } = await open("#m=memory&context=65536");
    for (const [key, check] of [["export_json", (t) => JSON.stringify(strip(JSON.parse(t))) === JSON.stringify(strip(report))],
                                ["export_csv", (t) => t.includes("state_bytes,449372160,B")]]) {
      const r = await page.evaluate((k) => window.k3.widget(k), key);
      if (!r) { ok(false, `${key} button on the page`); continue; }
      const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }),
                                      page.mouse.click(r.x + r.w / 2, r.y + r.h / 2)]);
      const text = fs.readFileSync(await dl.path(), "utf8");
      ok(check(text), `${key} downloads ${dl.suggestedFilename()} with the report's content`);
    }
  }

  // 3c. High-DPI: at device scale 2 the canvas renders at full resolution.
  {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 2 });
    const p2 = await ctx.newPage();
    await p2.goto(base + "#m=memory");
    await p2.waitForFunction(() => window.k3 && window.k3.ready, null, { timeout: 30000 });
    await p2.evaluate(() => window.k3.run());
    const dims = await p2.evaluate(() => [document.getElementById("canvas").width, document.getElementById("canvas").height]);
    ok(dims[0] === 2560 && dims[1] === 1600, `canvas backing store follows devicePixelRatio 2 (${dims.join("x")})`);
    const img = decodePng(await p2.screenshot({ path: path.join(outDir, "memory@2x.png") }));
    ok(img.width === 2560 && contentStats(img).nonBackground > 0.03, "the page draws at device scale 2");
    await ctx.close();
  }

  // 4. Hostile links: each gives a ready page that shows what became of the link (or why it was not
  // run), never a dead one. Opened afresh, as a shared link is, except `follow: true` (a hash change on
  // the page already open: the Overview's figures are not computed again). `applied: false`: the banner
  // must say that none of the link was applied; `report: false`: nothing ran; `applies`: the link the
  // page shows once it has applied it; `shot`: a screenshot's name. Runs are not awaited (a link is judged by what it shows once ready).
  {
    const t0 = Date.now();
    const long = "#m=memory&context=4096&" + "x".repeat(9000);
    const cases = [
      { hash: "#m=nosuch&context=1", module: "overview", message: /unknown module 'nosuch'/, applied: false },
      { hash: long, module: "overview", message: /9,0\d\d characters long; the page reads 8,192 at most/, applied: false,
        follow: true, shot: "link-too-long" },
      { hash: "#m=memory&bogus=1&" + Array.from({ length: 300 }, (_, i) => `k${i}=${i}`).join("&"), module: "memory",
        message: /ignored: unknown parameter 'bogus'[\s\S]*more problems/ },
      { hash: "#m=memory&context=abc&budget_gib=NaN&tp=Infinity", module: "memory",
        message: /ignored: bad value 'abc' for parameter 'context'/, applies: /^#m=memory$/ },
      { hash: "#m=memory&context=99999999999999&budget_gib=-1e308", module: "memory", message: /clamped to/,
        applies: /^#m=memory&context=16777216&budget_gib=0.01$/ },
      { hash: "#m=memory&context=4096&%zz=1&context=8192&%%=%&&&=&tab=%00", module: "memory",
        message: /malformed %-escape[\s\S]*given twice/, applies: /^#m=memory&context=4096$/ },
      { hash: "#m=fleet&trace=x", module: "fleet", message: /^Not run: trace 'x' is not available here/m, report: false,
        shot: "trace-path" },
      { hash: "#m=fleet&instances=99999", module: "fleet", message: /instances=99999 is out of range \[1, 64\]; clamped to 64/,
        applies: /^#m=fleet&instances=64$/ },
      { hash: "#m=fleet&instances=8&instances=4", module: "fleet",
        message: /ignored: parameter 'instances' given twice \(instances=8, instances=4\); the first is used/,
        applies: /^#m=fleet&instances=8$/ },
      { hash: "#m=fleet&instances=1e-400", module: "fleet", message: /ignored: bad value '1e-400'.*underflows to 0/,
        applies: /^#m=fleet$/ },
      { hash: "#m=tenants&duration_s=3600", module: "tenants", report: false,
        message: /^Not run: the run would take about [\d.]+ s natively .*above the limit of 10(\.0)? s/m },
    ];
    for (const c of cases) await hostile(c);
    console.log(`     hostile links took ${Date.now() - t0} ms`);
  }
  await kdaFreezeLink();

  // 4b. A refusal keeps the last result: a good run, then links to the same module that are refused (by
  // the module's validator, by the run budget, a trace path the page cannot read). The result stays,
  // marked as for other parameters, under the reason.
  {
    const t0 = Date.now();
    for (const [good, refusals] of [
      ["#m=memory&context=65536", [["#m=memory&context=65536&tp=5", /^Not run: tensor parallelism 5 must divide/]]],
      ["#m=fleet", [["#m=fleet&trace=x", /^Not run: trace 'x' is not available here/],
                    ["#m=fleet&sessions=4096", /^Not run: the run would (take|hold) about .*above the limit of/]]]]) {
      const before = await follow(good);
      for (const [refused, why] of refusals) {
        const kept = await follow(refused);
        const st = await page.evaluate(() => window.k3.state());
        const same = before && kept && JSON.stringify(strip(before)) === JSON.stringify(strip(kept));
        ok(same && st.report && st.stale, `${refused} keeps the result of ${good} on screen (marked as for other parameters)`);
        ok(st.messages.some((m) => why.test(m) && /The report below is the last result, for other parameters\.$/.test(m)),
           `  ... under the reason: ${JSON.stringify(st.messages).slice(0, 200)}`);
        if (refused === "#m=fleet&sessions=4096") await page.screenshot({ path: path.join(outDir, "refused.png") });
      }
    }
    console.log(`     the refusals took ${Date.now() - t0} ms`);
  }

  // 4d. A run that exhausts the WebAssembly memory: the page names it, keeps the last frame and restarts
  // on the last result with the message as a banner. (Links that would are refused before they run; the
  // test hook allocates until the heap is full, as such a run would.)
  {
    const t0 = Date.now();
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const p3 = await ctx.newPage();
    await p3.goto(base + "#m=memory");
    await p3.waitForFunction(() => window.k3 && window.k3.ready && window.k3.state().report, null, { timeout: 30000 });
    await p3.evaluate(() => { window.location.hash = "#m=kda&tokens=4096&heads=4"; });
    await p3.waitForFunction(() => window.k3.state().busy && window.k3.running, null, { timeout: 10000 });
    // Fill the heap from outside the run (the page's own malloc, halving the request until nothing is
    // left): the run's next allocation fails as it would on its own.
    await p3.evaluate(() => {
      for (let n = 64 << 20; n >= 8;) if (!Module._malloc(n)) n >>= 1;
    }).catch(() => {});
    await p3.waitForFunction(() => window.k3.stopped(), null, { timeout: 30000 }).catch(() => {});
    const said = await p3.evaluate(() => window.k3.stopped());
    ok(/ran out of memory while running module 1 kda with heads=4, tokens=4096: its WebAssembly memory had grown to [\d,]+ MiB \(the page's limit is 1,024 MiB\)/.test(said),
       `out of memory: "${said}"`);
    await p3.screenshot({ path: path.join(outDir, "out-of-memory.png") });
    await p3.click("#crash-back");
    await p3.waitForFunction(() => window.k3 && window.k3.ready && window.k3.state().report, null, { timeout: 30000 });
    const st = await p3.evaluate(() => window.k3.state());
    ok(st.module === "memory" && st.messages.some((m) => /^The page restarted\. The explorer ran out of memory/.test(m)),
       `restart on the last result: ${st.module}, banner ${JSON.stringify(st.messages).slice(0, 120)}`);
    await p3.screenshot({ path: path.join(outDir, "restarted.png") });
    await ctx.close();
    console.log(`     out of memory and the restart took ${Date.now() - t0} ms`);
  }

  // 5. No busy loop when idle: the page stops drawing when nothing changes.
  {
    await open("#m=memory");
    await page.mouse.move(5, 790);
    await page.waitForTimeout(500);
    const f0 = await page.evaluate(() => window.k3.frames());
    await page.waitForTimeout(1500);
    const f1 = await page.evaluate(() => window.k3.frames());
    ok(f1 - f0 <= 3, `idle page drew ${f1 - f0} frames in 1.5 s`);
  }
  const uniq = [...new Set(problems)];
  ok(uniq.length === 0, "no console errors, failed or external requests" + (uniq.length ? ":\n     " + uniq.join("\n     ") : ""));
} catch (e) {
  ok(false, "browser test crashed: " + (e && e.stack || e));
} finally {
  await browser.close();
  server.kill();
}
console.log(failures ? `\n${failures} browser check(s) failed` : "\nbrowser: all checks passed");
process.exit(failures ? 1 : 0);
