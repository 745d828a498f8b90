// The module texts quote no run result that nothing recomputes (core/experiments/doc_figures.h):
//  - every `{key}` placeholder names a scalar of the module's default report;
//  - every figure with a unit (12 %, 41.4 MiB, 5,384 tokens, 0.87 ms, 3.7x) is one the default report
//    computes (a scalar, a table cell or a parameter, at the precision the text shows), or is a
//    citation, written inside double quotes with its source ("1,056 tokens", vLLM's log).
// Usage: node check_texts.mjs LIST_JSON REPORT_DIR (REPORT_DIR/<id>.json: `k3cli run <id> --json`)
import fs from 'node:fs';
import path from 'node:path';

const [listPath, reportDir] = process.argv.slice(2);
const modules = JSON.parse(fs.readFileSync(listPath, 'utf8')).modules;

const UNITS = {
  '%': [0.01], 'B': [1], 'KiB': [1024], 'MiB': [1024 ** 2], 'GiB': [1024 ** 3], 'TiB': [1024 ** 4],
  'KB': [1e3], 'kB': [1e3], 'MB': [1e6], 'GB': [1e9], 'TB': [1e12], 'GB/s': [1e9], 'MB/s': [1e6],
  'ms': [1e-3], 's': [1], 'us': [1e-6], 'µs': [1e-6], 'tokens': [1], 'token': [1], 'x': [1], '×': [1],
};
const unitAlt = Object.keys(UNITS).sort((a, b) => b.length - a.length)
  .map(u => u.replace(/[/%]/g, m => '\\' + m)).join('|');
// A number (1,234,567 or 12.5) then an optional space and a unit that ends there.
const FIGURE = new RegExp(`(?<![\\w.,-])(\\d{1,3}(?:,\\d{3})+|\\d+(?:\\.\\d+)?)\\s?(${unitAlt})(?![\\w/])`, 'g');

// Every number a report states: scalars, table cells, numeric parameters.
function reportNumbers(r) {
  const out = [];
  for (const s of Object.values(r.scalars)) if (typeof s.value === 'number') out.push(s.value);
  for (const t of r.tables) for (const row of t.rows) for (const c of row) if (typeof c === 'number') out.push(c);
  for (const [, v] of Object.entries(r.params)) if (typeof v === 'number') out.push(v);
  return out.filter(Number.isFinite);
}

const sigDigits = s => s.replace(/[,.]/g, '').replace(/^0+/, '').length || 1;
// Whether `text` (as written, with `scale` to the report's units) shows `v` at its own precision.
function shows(text, scale, v) {
  const t = Number(text.replace(/,/g, ''));
  const decimals = text.includes('.') ? text.split('.')[1].length : 0;
  for (const x of [v / scale, v]) {  // the report's value in the text's unit, or already in it
    if (Math.abs(x - t) <= 0.5 * 10 ** -decimals * (1 + 1e-9)) return true;
    const d = sigDigits(text);  // "41.4 MiB" from 43,417,600 B; "2 %" from 0.0229
    if (t !== 0 && Number(x.toPrecision(Math.max(1, d))) === t) return true;
  }
  return false;
}

// Text outside double-quoted citations.
const unquoted = s => s.replace(/"[^"\n]*"/g, ' ').replace(/“[^”\n]*”/g, ' ');

let problems = 0;
for (const m of modules) {
  const file = path.join(reportDir, m.id + '.json');
  if (!fs.existsSync(file)) { console.log(`texts ${m.id}: no report to check against`); problems++; continue; }
  const r = JSON.parse(fs.readFileSync(file, 'utf8'));
  const nums = reportNumbers(r);
  const scalars = new Set([...Object.keys(r.scalars), ...Object.keys(r.timing || {})]);
  for (const [name, text] of [['How it works', m.how_it_works], ["Where it doesn't pay", m.where_it_does_not_pay]]) {
    for (const [, key] of text.matchAll(/\{([a-z_][a-z0-9_]*)\}/g))
      if (!scalars.has(key)) { console.log(`texts ${m.id} (${name}): {${key}} names no scalar of the report`); problems++; }
    const plain = unquoted(text.replace(/\{[a-z_][a-z0-9_]*\}/g, ' '));
    for (const [all, num, unit] of plain.matchAll(FIGURE)) {
      const ok = UNITS[unit].some(scale => nums.some(v => shows(num, scale, v)));
      if (!ok) {
        console.log(`texts ${m.id} (${name}): "${all}" is no figure of the default report (quote a source, or use a placeholder)`);
        problems++;
      }
    }
  }
}
console.log(problems ? `check_texts: ${problems} problem(s)` : `check_texts: ${modules.length} modules' texts quote only live or cited figures`);
process.exit(problems ? 1 : 0);
