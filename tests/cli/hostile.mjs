// Hostile input through the CLI (issue 20): every parameter of every module at its extremes and
// outside them, bad spellings of numbers, odd trace files, and the expensive parameters at their
// maxima two at a time. Each run must end with exit 0 (ok), 1 (a real failing check) or 2 (refused
// with a message); an accepted run must stay within the run limits (core/experiments/experiment.h:
// 10 s natively, 1 GiB) and within a small multiple of its own estimate (`k3cli run ... --estimate`).
// CPU time and peak memory come from GNU time, so a loaded machine does not fail the limits.
//
// Usage: node hostile.mjs K3CLI [--quick] [--explore] [--modules a,b] [--jobs N]
//   --quick: the test command's sweep (a few minutes on 2 cores): each parameter at its extremes and just
//     outside them, one bad spelling of a number per numeric parameter (the spellings dealt round robin, so
//     every spelling meets every module), the three most expensive parameters' maxima two at a time.
//     Without it every parameter meets every spelling, and the four most expensive are paired.
//   --modules: only these modules (kda-check: the malformed golden folders).
//   --explore: print every run's figures (time, memory, estimate) instead of only the failures.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
const k3cli = args[0];
const explore = args.includes('--explore');
const quick = args.includes('--quick');
const pick = (flag, dflt) => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : dflt;
};
const only = pick('--modules', '') ? pick('--modules', '').split(',') : null;
const jobs = Number(pick('--jobs', os.cpus().length));
const kLimitSeconds = 10, kLimitBytes = 1024 ** 3;
// An accepted run may take this many times its estimate (plus a floor for start-up) before it counts
// as a hang past its estimate: the estimates are upper bounds with margin, not predictions.
const kOverEstimate = 3, kFloorSeconds = 1.5;

if (!k3cli) {
  console.error('usage: node hostile.mjs K3CLI [--quick] [--explore] [--modules a,b] [--jobs N]');
  process.exit(2);
}

// ---- odd trace files --------------------------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k3-hostile-'));
const line = (ts, n, ids) => JSON.stringify({ timestamp: ts, input_length: n, output_length: 8, hash_ids: ids });
const traces = {
  empty: '',
  blank_lines: '\n\n\n',
  binary: Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) & 255)),
  truncated: line(0, 512, [1]) + '\n' + line(5, 1024, [1, 2]).slice(0, 30),
  crlf: line(0, 512, [1]) + '\r\n' + line(5, 1024, [1, 2]) + '\r\n',
  cr_only: line(0, 512, [1]) + '\r' + line(5, 1024, [1, 2]) + '\r',
  bom: '\ufeff' + line(0, 512, [1]) + '\n' + line(5, 1024, [1, 2]) + '\n',
  huge_ids: line(0, 1024, [2 ** 60, 2 ** 61]) + '\n',
  unsorted: line(50, 512, [1]) + '\n' + line(5, 1024, [1, 2]) + '\n',
  zero_length: line(0, 0, []) + '\n',
};
const tracePaths = { directory: tmp, dev_zero: '/dev/zero', missing: path.join(tmp, 'missing.jsonl') };
for (const [name, body] of Object.entries(traces)) {
  const p = path.join(tmp, `${name}.jsonl`);
  fs.writeFileSync(p, body);
  tracePaths[name] = p;
}

// ---- malformed golden folders (k3cli kda-check) -------------------------------------------------

const meta = (t, k) => `B 1\nT ${t}\nH 1\nHV 1\nK ${k}\nV ${k}\nscale 1\ninitial_state 0\n`;
const goldenMeta = {
  no_meta: null,
  junk_meta: 'B x\nT\n',
  binary_meta: traces.binary,
  negative_t: meta(-5, 4),
  huge_t: meta('99999999999999999999', 4),
  past_the_limits: meta(200000, 128),
};
const goldenPaths = { a_file: tracePaths.crlf, dev_zero: '/dev/zero' };
for (const [name, body] of Object.entries(goldenMeta)) {
  const dir = path.join(tmp, `golden_${name}`);
  fs.mkdirSync(dir);
  if (body !== null) fs.writeFileSync(path.join(dir, 'meta.txt'), body);
  goldenPaths[name] = dir;
}
{
  // A bundled folder with one input cut short.
  const bundled = path.join(path.dirname(new URL(import.meta.url).pathname), '../data/golden/kda/t1_k16_v16');
  const dir = path.join(tmp, 'golden_truncated');
  fs.cpSync(bundled, dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'q.f32'), Buffer.alloc(6));
  goldenPaths.truncated = dir;
}

// ---- the runs ---------------------------------------------------------------------------------

const kBadNumbers = ['nan', 'inf', '1e-400', '1e400', '0x10', '-1', 'abc', ''];
// The values one parameter (the `index`-th numeric one of its module) is tried at: its extremes, just
// outside them, and bad spellings (in --quick, one of them).
function valuesOf(p, index) {
  if (p.kind === 'flag') return ['0', '1', '2', 'yes'];
  if (p.kind === 'choice') return [...(p.choices || []).map((c) => c.id ?? c), 'bogus'];
  if (p.kind === 'text') return Object.values(tracePaths).concat(['', 'synthetic']);
  const span = Math.max(Math.abs(p.max - p.min), 1);
  const v = [String(p.min), String(p.max), String(p.min - span), String(p.max + span)];
  v.push(...(quick ? [kBadNumbers[index % kBadNumbers.length]] : kBadNumbers));
  if (p.kind === 'integer' && !quick) v.push(String(p.min + 0.5));
  return v;
}

function runOnce(argv, timeoutS) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn('/usr/bin/time', ['-f', '%U %S %M', ...argv], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutS * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const last = err.trim().split('\n').pop() || '';
      const [u, s, kb] = last.split(' ').map(Number);
      resolve({ code, signal, cpu: u + s, bytes: kb * 1024, wall: (Date.now() - t0) / 1000, err });
    });
  });
}

function estimateOf(module, kv) {
  try {
    const out = execFileSync(k3cli, ['run', module, ...kv, '--estimate'], { stdio: ['ignore', 'pipe', 'pipe'] });
    return { accepted: true, ...JSON.parse(out.toString().trim().split('\n').pop()) };
  } catch (e) {
    const text = (e.stdout || '').toString().trim().split('\n').pop();
    let est = {};
    try {
      est = JSON.parse(text);
    } catch {}
    return { accepted: false, code: e.status, message: (e.stderr || '').toString().trim(), ...est };
  }
}

const failures = [];
let runs = 0;
async function check(module, kv) {
  const est = estimateOf(module, kv);
  ++runs;
  if (!est.accepted) {
    if (est.code !== 2 || !est.message) failures.push(`${module} ${kv.join(' ')}: estimate exit ${est.code}`);
    if (explore) console.log(`refused ${module} ${kv.join(' ')}: ${est.message.split('\n')[0]}`);
    return;
  }
  const allowed = Math.min(kLimitSeconds, Math.max(kOverEstimate * est.seconds, kFloorSeconds));
  const r = await runOnce([k3cli, 'run', module, ...kv], 4 * kLimitSeconds);
  const what = `${module} ${kv.join(' ')}`;
  const fig = `cpu ${r.cpu.toFixed(2)} s (estimate ${Number(est.seconds).toFixed(2)} s), ` +
    `${(r.bytes / 2 ** 20).toFixed(0)} MiB (estimate ${(est.bytes / 2 ** 20).toFixed(0)} MiB)`;
  if (explore) console.log(`exit ${r.code} ${what}: ${fig}`);
  if (r.signal || ![0, 1, 2].includes(r.code)) failures.push(`${what}: killed or crashed (${r.signal || r.code})`);
  else if (r.cpu > allowed) failures.push(`${what}: ${fig}, past ${allowed.toFixed(1)} s`);
  else if (r.bytes > kLimitBytes) failures.push(`${what}: ${fig}, past the memory limit`);
}

// Each malformed folder is refused (exit 2) with a message naming it, within the start-up floor.
async function checkGolden(name, dir) {
  ++runs;
  const r = await runOnce([k3cli, 'kda-check', dir], 4 * kLimitSeconds);
  const message = r.err.split('\n').find((l) => l.startsWith('k3cli')) || '';
  if (explore) console.log(`exit ${r.code} kda-check ${name}: ${message}`);
  if (r.code !== 2 || !message.includes(dir))
    failures.push(`kda-check ${name}: exit ${r.signal || r.code}, ${message || 'no message'} (expected 2 naming ${dir})`);
  else if (r.cpu > kFloorSeconds) failures.push(`kda-check ${name}: cpu ${r.cpu.toFixed(2)} s before refusing`);
}

async function pool(tasks) {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]();
  };
  await Promise.all(Array.from({ length: jobs }, worker));
}

const list = JSON.parse(execFileSync(k3cli, ['list', '--json']).toString());
const tasks = [];
for (const m of list.modules) {
  if (only && !only.includes(m.id)) continue;
  let numericIndex = 0;
  for (const p of m.params) {
    const index = p.kind === 'integer' || p.kind === 'real' ? numericIndex++ : 0;
    for (const v of valuesOf(p, index)) tasks.push(() => check(m.id, [`${p.key}=${v}`]));
  }
  // The expensive parameters: those whose maximum alone raises the estimate most, at their maxima
  // two at a time.
  const numeric = m.params.filter((p) => p.kind === 'integer' || p.kind === 'real');
  const ranked = numeric
    .map((p) => ({ p, s: Number(estimateOf(m.id, [`${p.key}=${p.max}`]).seconds) || 0 }))
    .sort((a, b) => b.s - a.s)
    .slice(0, quick ? 3 : 4);
  for (let i = 0; i < ranked.length; ++i)
    for (let j = i + 1; j < ranked.length; ++j)
      tasks.push(() => check(m.id, [`${ranked[i].p.key}=${ranked[i].p.max}`, `${ranked[j].p.key}=${ranked[j].p.max}`]));
}
if (!only || only.includes('kda-check')) for (const [name, dir] of Object.entries(goldenPaths)) tasks.push(() => checkGolden(name, dir));
const t0 = Date.now();
await pool(tasks);
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`hostile: ${runs} runs in ${((Date.now() - t0) / 1000).toFixed(0)} s, ${failures.length} problem(s)`);
for (const f of failures) console.log(`  ${f}`);
process.exit(failures.length ? 1 : 0);
