// The fractions of their device limits that module 1 reports for its kernels and the runnable model
// (timing tables), and whether they are plausible: above 0, and under 1.5. Above 1 a device probe fell
// short of the core's peak; timing noise moves a fraction by tens of percent, not by half. This is what
// caught the multiply+add probe that spilled with AVX2 (kernels shown at 1.8-2.3 of their limit).
// Used by the page test and, as a command, by compare_builds.sh:
//   node roofline_fractions.mjs REPORT.json   (exit 1 and the fractions when one is implausible)
import fs from "node:fs";
import { fileURLToPath } from "node:url";

export const kRooflineTables = ["Kernels against this device's limits", "The runnable model"];

// [{ name, fractions }] for each roofline table the report's timing has.
export function rooflineFractions(timing) {
  return (timing.tables || [])
    .filter((t) => kRooflineTables.some((n) => t.name.startsWith(n)))
    .map((t) => ({ name: t.name, fractions: t.rows.map((r) => r[r.length - 1]) }));
}

export const plausible = (fractions) => fractions.length > 0 && fractions.every((f) => f > 0 && f < 1.5);

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const report = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const tables = rooflineFractions(report.timing || {});
  const bad = tables.length < kRooflineTables.length || !tables.every((t) => plausible(t.fractions));
  for (const t of tables) console.log(`  ${t.name}: ${t.fractions.map((f) => f.toFixed(2)).join(" ")}`);
  if (bad) console.log(`  expected ${kRooflineTables.length} tables, every fraction in (0, 1.5)`);
  process.exit(bad ? 1 : 0);
}
