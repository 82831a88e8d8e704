// Validates JSON documents against docs/schemas/ with Ajv (the npm package, pinned in
// tests/charts/package.json), the validator the JSON Schema community keeps. Each document must
// name its schema ("schema": "mesh-reconciler/<kind>/v<N>"), which selects
// docs/schemas/<kind>.v<N>.schema.json, and a schema file must exist for it.
//
// Usage: node tests/schemas/validate.mjs EXPECTED_KIND FILE...
//   EXPECTED_KIND: e.g. report/v1; every FILE must name it.
//        node tests/schemas/validate.mjs --lines KIND FILE...
//   JSON lines (log/v1: --log-format json), which name no schema: every line of every FILE
//   must be one object that matches docs/schemas/<kind>.schema.json, and there must be a line.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, main, requireTool } from '../charts/lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const schemaDir = path.join(here, '..', '..', 'docs', 'schemas');

function compile(ajv, schemaFile) {
  const schema = JSON.parse(fs.readFileSync(schemaFile, 'utf8'));
  return ajv.getSchema(schema.$id) ?? ajv.compile(schema);
}

function validateLines(ajv, kind, files) {
  const match = /^([a-z]+)\/v([0-9]+)$/.exec(kind);
  check(match, `--lines ${kind}: not <kind>/v<N>`);
  const schemaFile = path.join(schemaDir, `${match[1]}.v${match[2]}.schema.json`);
  check(fs.existsSync(schemaFile), `no ${path.relative(process.cwd(), schemaFile)}`);
  const validate = compile(ajv, schemaFile);
  for (const file of files) {
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
    check(lines.length > 0, `${file}: no lines`);
    lines.forEach((line, i) => {
      let doc;
      try {
        doc = JSON.parse(line);
      } catch (e) {
        check(false, `${file}:${i + 1}: not JSON (${e.message}): ${line}`);
      }
      check(validate(doc), `${file}:${i + 1} does not match ${path.basename(schemaFile)}: ` +
                           ajv.errorsText(validate.errors) + `\n${line}`);
    });
    console.log(`ok ${file}: ${lines.length} lines of ${kind}`);
  }
}

await main(async (args) => {
  const lines = args[0] === '--lines';
  const [expected, ...files] = lines ? args.slice(1) : args;
  check(expected && files.length > 0,
        'usage: validate.mjs EXPECTED_KIND FILE... | validate.mjs --lines KIND FILE...');
  const Ajv = requireTool('ajv').default;
  const addFormats = requireTool('ajv-formats').default ?? requireTool('ajv-formats');
  const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
  addFormats(ajv);
  if (lines) {
    validateLines(ajv, expected, files);
    return;
  }
  for (const file of files) {
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    check(doc !== null && typeof doc === 'object' && !Array.isArray(doc), `${file}: not an object`);
    check(typeof doc.schema === 'string', `${file}: names no schema`);
    const match = /^mesh-reconciler\/([a-z]+)\/v([0-9]+)$/.exec(doc.schema);
    check(match, `${file}: schema "${doc.schema}" is not mesh-reconciler/<kind>/v<N>`);
    check(doc.schema === `mesh-reconciler/${expected}`,
          `${file}: schema "${doc.schema}", expected mesh-reconciler/${expected}`);
    const schemaFile = path.join(schemaDir, `${match[1]}.v${match[2]}.schema.json`);
    check(fs.existsSync(schemaFile), `${file}: no ${path.relative(process.cwd(), schemaFile)}`);
    const validate = compile(ajv, schemaFile);
    check(validate(doc), `${file} does not match ${path.basename(schemaFile)}:\n` +
                         ajv.errorsText(validate.errors, { separator: '\n' }));
    console.log(`ok ${file}: ${doc.schema}`);
  }
});
