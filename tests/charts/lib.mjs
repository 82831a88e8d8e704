// Shared helpers of the chart tests' node tools (validate.mjs, assert.mjs, pod.mjs).
//
// Node modules come from <repo>/.tools/node (scripts/install-test-tools.sh installs them from
// tests/charts/package-lock.json); MESH_TOOLS_DIR overrides <repo>/.tools.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
const toolsDir = process.env.MESH_TOOLS_DIR ?? path.join(repoRoot, '.tools');
export const requireTool = createRequire(path.join(toolsDir, 'node', 'package.json'));
export const YAML = requireTool('yaml');

export class CheckError extends Error {}

// Throws a CheckError: a test failure, reported by main() without a stack trace.
export function check(condition, message) {
  if (!condition) throw new CheckError(message);
}

// Runs `body` and turns its outcome into an exit code: 0 passed, 1 a check failed, 2 a bug.
export async function main(body) {
  try {
    await body(process.argv.slice(2));
  } catch (error) {
    if (error instanceof CheckError) {
      console.error(`FAIL: ${error.message}`);
      process.exit(1);
    }
    console.error(error);
    process.exit(2);
  }
}

// The documents of a `helm template` output: [{doc, text}], in order, empty ones dropped.
// Parsed as YAML 1.1, as Kubernetes (sigs.k8s.io/yaml) reads manifests.
export function readManifests(file) {
  const text = fs.readFileSync(file, 'utf8');
  const out = [];
  for (const raw of text.split(/^---[ \t]*$/m)) {
    const parsed = YAML.parseDocument(raw, { version: '1.1', prettyErrors: true });
    if (parsed.errors.length > 0) {
      throw new CheckError(`${file}: YAML error: ${parsed.errors[0].message}`);
    }
    const doc = parsed.toJS();
    if (doc !== null && doc !== undefined) out.push({ doc, text: raw });
  }
  return out;
}

export function docName(doc) {
  return `${doc.kind}/${doc.metadata?.name}`;
}

export function findOne(docs, kind, name) {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  check(found.length === 1, `expected one ${kind}${name ? ` named ${name}` : ''}, found ${found.length}`);
  return found[0];
}

export function findMaybe(docs, kind, name) {
  return docs.find((d) => d.kind === kind && d.metadata?.name === name);
}

// The value following `flag` in an argument list ("--flag value" or "--flag=value").
export function flagValue(args, flag) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) return args[i + 1];
    if (args[i].startsWith(`${flag}=`)) return args[i].slice(flag.length + 1);
  }
  return undefined;
}

// The literal value of an env var of a container (undefined when absent or valueFrom).
export function envValue(container, name) {
  return (container.env ?? []).find((e) => e.name === name)?.value;
}

export function allContainers(podSpec) {
  return [
    ...(podSpec.initContainers ?? []).map((c) => ({ ...c, init: true })),
    ...podSpec.containers.map((c) => ({ ...c, init: false })),
  ];
}

function isUnder(file, dir) {
  return file === dir || file.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

// Where an absolute path of a container lands: {mount, volume, rel} for the deepest volume
// mount holding it, or undefined.
export function locate(podSpec, container, file) {
  const mounts = (container.volumeMounts ?? [])
    .filter((m) => isUnder(file, m.mountPath))
    .sort((a, b) => b.mountPath.length - a.mountPath.length);
  if (mounts.length === 0) return undefined;
  const mount = mounts[0];
  check(!mount.subPath, `container ${container.name}: subPath mounts are not supported here`);
  const volume =
    (podSpec.volumes ?? []).find((v) => v.name === mount.name) ??
    { name: mount.name, claimTemplate: true };
  return { mount, volume, rel: path.posix.relative(mount.mountPath, file) };
}

// The files a Secret / ConfigMap volume (or projected source) presents: {path: {name, key}}.
export function volumeFiles(volume) {
  const files = {};
  const add = (kind, name, items) => {
    for (const item of items ?? []) files[item.path] = { kind, name, key: item.key };
    if (!items) files['*'] = { kind, name };
  };
  if (volume.secret) add('Secret', volume.secret.secretName, volume.secret.items);
  if (volume.configMap) add('ConfigMap', volume.configMap.name, volume.configMap.items);
  for (const source of volume.projected?.sources ?? []) {
    if (source.secret) add('Secret', source.secret.name, source.secret.items);
    if (source.configMap) add('ConfigMap', source.configMap.name, source.configMap.items);
  }
  return files;
}

// Bytes of one key of a Secret or ConfigMap document.
export function objectData(doc, key) {
  if (doc.kind === 'Secret') {
    if (doc.stringData && key in doc.stringData) return Buffer.from(doc.stringData[key]);
    if (doc.data && key in doc.data) return Buffer.from(doc.data[key], 'base64');
  } else {
    if (doc.data && key in doc.data) return Buffer.from(doc.data[key]);
    if (doc.binaryData && key in doc.binaryData) return Buffer.from(doc.binaryData[key], 'base64');
  }
  return undefined;
}

export function objectKeys(doc) {
  return [
    ...Object.keys(doc.data ?? {}),
    ...Object.keys(doc.stringData ?? {}),
    ...Object.keys(doc.binaryData ?? {}),
  ];
}

// The pod's single StatefulSet: {sts, pod (spec), byName (containers by name)}.
export function statefulSet(docs) {
  const sts = findOne(docs, 'StatefulSet');
  const pod = sts.spec.template.spec;
  const byName = Object.fromEntries(allContainers(pod).map((c) => [c.name, c]));
  return { sts, pod, byName };
}

// nats-server configuration helpers (the subset the chart writes: `key: value` lines).
export function natsSetting(conf, key) {
  const m = conf.match(new RegExp(`^\\s*${key}\\s*[:=]\\s*"?([^"\\n]*?)"?\\s*$`, 'm'));
  return m?.[1];
}

export function natsIncludes(conf) {
  return [...conf.matchAll(/^\s*include\s+"?([^"\s]+)"?\s*$/gm)].map((m) => m[1]);
}

export function portOf(hostPort) {
  return Number(String(hostPort).split(':').pop());
}
