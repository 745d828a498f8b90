// The project's written rules, checked (docs/architecture.md): formatting by .clang-format, no
// function over 80 lines in core/ and ui/, includes that follow the layers, kernel code only in the
// kernel folders, comments that cite only files that exist, and one definition per type name. Usage: node tests/style/check_style.mjs [--list-long]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const MAX_FUNCTION_LINES = 80;
const COLUMN_LIMIT = 110;  // .clang-format's ColumnLimit
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
process.chdir(root);
const tracked = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], { encoding: "utf8" })
  .split("\n").filter((f) => f && fs.existsSync(f));
const cpp = tracked.filter((f) => /\.(cpp|h)$/.test(f) && /^(core|ui|tests)\//.test(f));
const problems = [];

// ---- formatting -------------------------------------------------------------------------------
function formatting() {
  for (let i = 0; i < cpp.length; i += 40) {
    const batch = cpp.slice(i, i + 40);
    try {
      execFileSync("clang-format", ["--dry-run", "-Werror", ...batch], { stdio: ["ignore", "ignore", "pipe"] });
    } catch (e) {
      const files = new Set(String(e.stderr).split("\n").map((l) => /^([^:]+):\d+:\d+: error/.exec(l)?.[1]).filter(Boolean));
      for (const f of files) problems.push(`${f}: not formatted (clang-format -i ${f})`);
    }
  }
}

// Lines clang-format cannot break (long raw strings, say) are over the limit all the same.
function lineLengths() {
  for (const f of cpp)
    fs.readFileSync(f, "utf8").split("\n").forEach((line, k) => {
      const n = [...line].length;
      if (n > COLUMN_LIMIT) problems.push(`${f}:${k + 1}: ${n} columns (at most ${COLUMN_LIMIT})`);
    });
}

// ---- source text without comments and literals --------------------------------------------------
// Comments, strings and character literals blanked (newlines kept, so line numbers stay).
function blank(src) {
  let out = "", i = 0;
  const keep = (s) => s.replace(/[^\n]/g, " ");
  while (i < src.length) {
    const c = src[i], n = src[i + 1];
    if (c === "/" && n === "/") { const e = src.indexOf("\n", i); const j = e < 0 ? src.length : e; out += keep(src.slice(i, j)); i = j; }
    else if (c === "/" && n === "*") { const j = src.indexOf("*/", i + 2) + 2; out += keep(src.slice(i, j)); i = j; }
    else if (c === "R" && n === '"' && !/\w/.test(src[i - 1] || "")) {
      const open = src.indexOf("(", i); const delim = ")" + src.slice(i + 2, open) + '"';
      const j = src.indexOf(delim, open) + delim.length; out += keep(src.slice(i, j)); i = j;
    } else if (c === '"' || (c === "'" && !/[0-9a-fA-F]/.test(src[i - 1] || ""))) {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === "\\" ? 2 : 1;
      out += keep(src.slice(i, j + 1)); i = j + 1;
    } else { out += c; i++; }
  }
  return out.replace(/^[ \t]*#.*$/gm, (l) => keep(l));  // preprocessor lines too
}

// Function bodies at namespace or class scope: [name, first line, last line].
function functions(src) {
  const text = blank(src);
  const found = [], stack = [];  // scope kinds: "ns", "class", "fn", "other"
  let stmtStart = 0;
  const lineOf = (pos) => text.slice(0, pos).split("\n").length;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === ";" ) { if (!stack.length || stack.at(-1) === "ns" || stack.at(-1) === "class") stmtStart = i + 1; continue; }
    if (c === "{") {
      const outer = stack.length ? stack.at(-1) : "ns";
      let kind = "other";
      if (outer === "ns" || outer === "class") {
        const head = text.slice(stmtStart, i).trim();
        if (/^(namespace\b|extern\s*$|extern\s)/.test(head) || head === "") kind = "ns";
        else if (/^(template\s*<.*>\s*)?(class|struct|union)\b/s.test(head) && !/\)\s*(const\s*)?$/.test(head)) kind = "class";
        else if (/\)\s*(const|noexcept|override|final|mutable|->[^{]*|:[^{]*)*\s*$/s.test(head) && !/=\s*$/.test(head) && !/^enum\b/.test(head))
          kind = "fn";
        if (kind === "fn") {
          const start = stmtStart + (text.slice(stmtStart, i).length - text.slice(stmtStart, i).trimStart().length);
          const name = (/([~\w:<>]+)\s*\(/.exec(head) || [, "?"])[1];
          stack.push({ kind, start: lineOf(start), name });
          continue;
        }
      }
      stack.push(kind);
      if (kind === "ns" || kind === "class") stmtStart = i + 1;
      continue;
    }
    if (c === "}") {
      const top = stack.pop();
      if (top && top.kind === "fn") found.push([top.name, top.start, lineOf(i)]);
      const now = stack.length ? stack.at(-1) : "ns";
      if (now === "ns" || now === "class") stmtStart = i + 1;
      continue;
    }
    if ((c === ":" ) && stack.length && stack.at(-1) === "class" && /\b(public|private|protected)\s*$/.test(text.slice(stmtStart, i)))
      stmtStart = i + 1;
  }
  return found;
}

function functionLengths(listAll) {
  const long = [];
  for (const f of cpp.filter((f) => /^(core|ui)\//.test(f))) {
    for (const [name, a, b] of functions(fs.readFileSync(f, "utf8"))) {
      const n = b - a + 1;
      if (n > MAX_FUNCTION_LINES) long.push([n, `${f}:${a} ${name}`]);
    }
  }
  long.sort((x, y) => y[0] - x[0]);
  for (const [n, where] of long) problems.push(`${where}: function of ${n} lines (at most ${MAX_FUNCTION_LINES})`);
  if (listAll) for (const [n, where] of long) console.log(`${n}\t${where}`);
}

// ---- include layers (docs/architecture.md) ---------------------------------------------------
const SERVING = ["base", "kda", "model", "memory"];
const ALLOWED = {
  base: [], kda: ["base"], memory: ["base"], model: ["base", "kda", "memory"],
  cache: SERVING, spec: SERVING, cp: SERVING, lifecycle: [...SERVING, "cache"],
  fleet: [...SERVING, "cache", "spec", "cp", "lifecycle"],
  boundaries: [...SERVING, "cache", "spec", "cp", "lifecycle", "fleet"],
  experiments: ["base"],
  modules: ["base", "kda", "model", "memory", "cache", "spec", "cp", "lifecycle", "fleet", "boundaries", "experiments", "modules"],
  cli: ["base", "kda", "model", "memory", "cache", "spec", "cp", "lifecycle", "fleet", "boundaries", "experiments", "modules"],
};
function layers() {
  for (const f of cpp.filter((f) => /^(core|ui)\//.test(f))) {
    const from = f.startsWith("ui/") ? "ui" : f.split("/")[1];
    const allowed = from === "ui" ? ["base", "experiments"] : ALLOWED[from];
    if (!allowed) { problems.push(`${f}: folder core/${from} has no rule in docs/architecture.md`); continue; }
    fs.readFileSync(f, "utf8").split("\n").forEach((line, k) => {
      const m = /^#include "core\/([a-z_]+)\//.exec(line);
      if (m && m[1] !== from && !allowed.includes(m[1]))
        problems.push(`${f}:${k + 1}: core/${from} may not include core/${m[1]} (docs/architecture.md)`);
    });
  }
}

// ---- kernel code stays with the kernels (core/CMakeLists.txt) ------------------------------------
// The compared builds (k3cli-scalar, k3cli-x86-64-v3) recompile only core/kda, core/model,
// core/modules/kda and core/cli and share every other object with the native build: SIMD code, the
// K3_SIMD switch or a direct call of a SIMD kernel anywhere else would put one build's kernels into
// another build's binary.
const KERNEL_DIRS = /^core\/(kda|model|modules\/kda|cli)\//;
function kernelsApart() {
  for (const f of cpp.filter((f) => f.startsWith("core/") && !KERNEL_DIRS.test(f) && !f.endsWith("_test.cpp"))) {
    const raw = fs.readFileSync(f, "utf8").split("\n");
    blank(raw.join("\n")).split("\n").forEach((line, k) => {
      const m = /\bK3_SIMD\b|\bxsimd\b|\w+_simd\s*\(|simd_enabled\s*\(/.exec(line) ||
                /^#include "(core\/kda\/(simd|vexp)\.h)"/.exec(raw[k]);
      if (m) problems.push(`${f}:${k + 1}: '${m[0]}' outside the kernel folders (core/CMakeLists.txt)`);
    });
  }
}

// ---- comments cite files that exist ---------------------------------------------------------------
function citations() {
  const basenames = new Set(tracked.map((f) => path.basename(f)));
  const external = /^(imgui|imgui_internal|doctest|xsimd|emscripten|GLFW\/glfw3|html5)\.h$/;
  for (const f of cpp.filter((f) => /^(core|ui|tests)\//.test(f))) {
    fs.readFileSync(f, "utf8").split("\n").forEach((line, k) => {
      const c = line.indexOf("//");
      if (c < 0 || /^\s*#include/.test(line)) return;
      for (const m of line.slice(c).matchAll(/\b([A-Za-z0-9_./-]+\.(md|h|cpp|sh|mjs))\b/g)) {
        const cited = m[1];
        if (external.test(cited) || /^(llama|whisper)\.cpp$/.test(cited)) continue;  // projects, not files
        const ok = fs.existsSync(cited) || fs.existsSync(path.join(path.dirname(f), cited)) ||
                   fs.existsSync(path.join("core", cited)) || (!cited.includes("/") && basenames.has(cited));
        if (!ok) problems.push(`${f}:${k + 1}: the comment cites ${cited}, which is not in the repository`);
      }
    });
  }
}

// ---- one definition per type name -----------------------------------------------------------
// Two headers defining k3::HitRecount compile and link without a word, and the program then reads
// one layout through the other (undefined behaviour that only one compiler showed). Types defined at
// column 0 of a header are at namespace scope (members are indented); their names must be unique per
// namespace.
function uniqueTypes() {
  const seen = new Map();
  for (const f of cpp.filter((f) => f.endsWith(".h"))) {
    let ns = "";
    fs.readFileSync(f, "utf8").split("\n").forEach((line, k) => {
      const n = /^namespace ([\w:]+) \{/.exec(line);
      if (n) ns = n[1];
      const m = /^(?:struct|class|union|enum class|enum) (\w+(?:::\w+)*)\b/.exec(line);
      if (!m || (/;\s*$/.test(line) && !line.includes("{"))) return;  // a declaration only
      const name = `${ns}::${m[1]}`, where = `${f}:${k + 1}`;
      if (seen.has(name)) problems.push(`${where}: ${name} is also defined at ${seen.get(name)} (one definition rule)`);
      else seen.set(name, where);
    });
  }
}

formatting();
lineLengths();
uniqueTypes();
functionLengths(process.argv.includes("--list-long"));
layers();
kernelsApart();
citations();
for (const p of problems) console.log(p);
console.log(problems.length ? `${problems.length} problems` : "style: formatted, lines at most 110 columns, functions at most 80 lines, layers kept, kernels apart, citations exist, type names unique");
process.exit(problems.length ? 1 : 0);
