// Checks examples/official-nats-chart-values.yaml, the overlay that adds mesh-reconciler to an
// install of the official NATS chart (nats-io/k8s, helm/charts/nats), without helm and without
// the chart (and, with --rendered, on what the official chart itself rendered):
//   1. the overlay is valid YAML;
//   2. it names only keys that the official chart's values.yaml has (official-nats-values-keys.txt,
//      derived from tag nats-1.3.16); below a `merge` or `patch` key the content is free;
//   3. it renders with a small STAND-IN of that chart's mechanism, written from reading its
//      templates: the nats container and the pod template as the chart lays them out (only the
//      parts the overlay touches), `container.merge` / `podTemplate.merge` (mergeOverwrite), then
//      `container.patch` / `podTemplate.patch` (RFC 6902 JSON Patch), the reloader's mounts
//      copied from the nats container's /etc/ mounts, and `config.merge` turned into nats.conf
//      as the chart's nats.formatConfig does (pretty JSON; "...$include" keys become include
//      directives; "<< x >>" unquoted);
//   4. the rendered pod is a valid Kubernetes Pod, and its wiring is the one the project's own
//      chart has (init container, sidecar, shared users folder, pid file and process namespace,
//      one user, the same MESH_RECONCILER_* settings in both, users scope account);
//   5. it writes the rendered nats.conf under ROOT (paths mapped), for chart_test.sh to run
//      `nats-server -t` on it with an account file rendered by the real binary.
// With --rendered HELM_OUTPUT.yaml (the official chart itself, rendered by `helm template` with
// the same values: chart_test.sh uses the vendored copy tests/charts/vendor/nats-1.3.16), step 3
// takes the pod template of its StatefulSet and the nats.conf of its ConfigMap instead of the
// stand-in, and steps 4 and 5 check those. What neither proves: anything a real cluster would
// show (image, volumes, probes at runtime).
//
// Usage: node tests/charts/official.mjs OVERLAY.yaml --root DIR [--values MORE.yaml]
//                                       [--rendered HELM_OUTPUT.yaml]
import fs from 'node:fs';
import path from 'node:path';
import util from 'node:util';

import { YAML, check, main, repoRoot, requireTool } from './lib.mjs';

const kKeysFile = path.join(repoRoot, 'tests/charts/official-nats-values-keys.txt');
const kConfigDir = '/etc/nats-config';  // the official chart's nats.conf folder

function isMap(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// Helm's mergeOverwrite, for the maps values hold: `src` wins, maps merge deeply.
function mergeOverwrite(dst, src) {
  const out = isMap(dst) ? { ...dst } : {};
  for (const [k, v] of Object.entries(src ?? {})) {
    out[k] = isMap(v) && isMap(out[k]) ? mergeOverwrite(out[k], v) : structuredClone(v);
  }
  return out;
}

// RFC 6902 add / replace / remove (what an overlay needs); anything else is refused.
function jsonPatch(doc, ops) {
  const out = structuredClone(doc);
  for (const op of ops ?? []) {
    check(['add', 'replace', 'remove'].includes(op.op), `patch op ${op.op} is not supported by the stand-in`);
    const parts = op.path.split('/').slice(1).map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = parts.pop();
    let parent = out;
    for (const p of parts) {
      parent = parent?.[Array.isArray(parent) ? Number(p) : p];
      check(parent !== undefined, `patch path ${op.path}: ${p} does not exist`);
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      if (op.op === 'add') parent.splice(index, 0, structuredClone(op.value));
      else if (op.op === 'replace') parent[index] = structuredClone(op.value);
      else parent.splice(index, 1);
    } else {
      check(isMap(parent), `patch path ${op.path}: the parent is not an object`);
      check(op.op === 'add' || last in parent, `patch path ${op.path}: ${last} does not exist`);
      if (op.op === 'remove') delete parent[last];
      else parent[last] = structuredClone(op.value);
    }
  }
  return out;
}

// Dotted key paths of `values`, stopping below merge/patch (free content) and at lists.
function keyPaths(values, prefix = '') {
  const out = [];
  for (const [k, v] of Object.entries(values)) {
    const p = prefix ? `${prefix}.${k}` : k;
    out.push(p);
    if (k === 'merge' || k === 'patch') continue;
    if (isMap(v)) out.push(...keyPaths(v, p));
  }
  return out;
}

// The parts of the official chart's pod template that the overlay touches (files/stateful-set/
// pod-template.yaml, nats-container.yaml and reloader-container.yaml, as of chart 1.3.16),
// written out by hand with the defaults: jetstream on, reloader on.
function standInPodTemplate() {
  return {
    metadata: { labels: { 'app.kubernetes.io/name': 'nats' } },
    spec: {
      containers: [{
        name: 'nats',
        image: 'nats:2.11.10-alpine',
        args: ['--config', `${kConfigDir}/nats.conf`],
        env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
        ports: [{ name: 'nats', containerPort: 4222 }, { name: 'monitor', containerPort: 8222 }],
        readinessProbe: { httpGet: { path: '/healthz?js-server-only=true', port: 'monitor' } },
        volumeMounts: [
          { name: 'config', mountPath: kConfigDir },
          { name: 'pid', mountPath: '/var/run/nats' },
          { name: 'nats-js', mountPath: '/data' },
        ],
      }],
      enableServiceLinks: false,
      shareProcessNamespace: true,  // set by the chart while the reloader is enabled
      volumes: [{ name: 'config', configMap: { name: 'nats-config' } }, { name: 'pid', emptyDir: {} }],
      terminationGracePeriodSeconds: 60,
    },
  };
}

function reloader(nats) {
  return {
    name: 'reloader',
    image: 'natsio/nats-server-config-reloader:0.20.1',
    args: ['-pid', '/var/run/nats/nats.pid', '-config', `${kConfigDir}/nats.conf`],
    volumeMounts: [{ name: 'pid', mountPath: '/var/run/nats' },
      ...nats.volumeMounts.filter((m) => m.mountPath.startsWith('/etc/'))],
  };
}

// nats.formatConfig of the official chart, on the stand-in's base configuration.
function natsConf(config, root) {
  const base = {
    pid_file: '/var/run/nats/nats.pid',
    port: 4222,
    http_port: 8222,
    jetstream: { store_dir: '/data' },
  };
  const merged = mergeOverwrite(base, config?.merge ?? {});
  const sorted = (v) => (isMap(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
  let text = JSON.stringify(sorted(merged), null, 4);
  text = text.replace(/".*\$include": "(.*)",?/g, 'include $1;').replace(/"<<\s+(.*?)\s+>>"/g, '$1');
  // Loopback paths under ROOT for nats-server -t (the folders are the chart's).
  return text.replaceAll('"/var/run/nats', `"${root}/var/run/nats`).replaceAll('"/data"', `"${root}/data"`);
}

function env(c) {
  // The sidecar's MESH_RECONCILER_REMOTE and _TOKEN_FILE name its own daemon for on-call's
  // commands: not pass settings.
  const session = ['MESH_RECONCILER_REMOTE', 'MESH_RECONCILER_TOKEN_FILE'];
  return Object.fromEntries((c.env ?? []).filter((e) => e.name.startsWith('MESH_RECONCILER_') && !session.includes(e.name)).map((e) => [e.name, e.value]));
}

function mountOf(c, name) {
  return (c.volumeMounts ?? []).find((m) => m.name === name);
}

await main(async (argv) => {
  const file = argv.shift();
  let root;
  let rendered;
  const more = [];
  while (argv.length > 0) {
    const flag = argv.shift();
    if (flag === '--root') root = path.resolve(argv.shift());
    else if (flag === '--values') more.push(argv.shift());
    else if (flag === '--rendered') rendered = argv.shift();
    else check(false, `unknown flag ${flag}`);
  }
  check(file && root, 'usage: official.mjs OVERLAY.yaml --root DIR [--values MORE.yaml]');

  // 1. Valid YAML (one document, a map).
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  check(docs.length === 1 && docs[0].errors.length === 0, `${file}: not one valid YAML document: ${docs[0]?.errors}`);
  let values = docs[0].toJS();
  check(isMap(values), `${file}: not a map of values`);
  console.log(`valid YAML: ${file}`);

  // 2. Only keys the official chart documents.
  const known = new Set(fs.readFileSync(kKeysFile, 'utf8').split('\n').filter((l) => l && !l.startsWith('#')));
  for (const p of keyPaths(values)) check(known.has(p), `${file}: ${p} is not a key of the official chart's values.yaml`);
  console.log(`keys: ${keyPaths(values).length} key paths, all in ${path.basename(kKeysFile)}`);
  for (const extra of more) values = mergeOverwrite(values, YAML.parse(fs.readFileSync(extra, 'utf8')));

  // 3. Render with the stand-in, or take what the official chart rendered.
  let pod;
  let conf;
  let nats;
  if (rendered) {
    const out = YAML.parseAllDocuments(fs.readFileSync(rendered, 'utf8')).map((d) => d.toJS()).filter(isMap);
    const sts = out.filter((d) => d.kind === 'StatefulSet');
    check(sts.length === 1, `${rendered}: expected one StatefulSet, found ${sts.length}`);
    pod = sts[0].spec.template.spec;
    const configMap = out.find((d) => d.kind === 'ConfigMap' && d.data?.['nats.conf']);
    check(configMap, `${rendered}: no ConfigMap with nats.conf`);
    // Loopback paths under ROOT for nats-server -t, as for the stand-in.
    conf = configMap.data['nats.conf'].replaceAll('"/var/run/nats', `"${root}/var/run/nats`)
      .replaceAll('"/data"', `"${root}/data"`);
    console.log(`official chart's render: StatefulSet ${sts[0].metadata.name}, ConfigMap ${configMap.metadata.name}`);
  } else {
    let template = standInPodTemplate();
    nats = template.spec.containers[0];
    nats = jsonPatch(mergeOverwrite(nats, values.container?.merge), values.container?.patch);
    template.spec.containers = [nats, reloader(nats)];
    template = jsonPatch(mergeOverwrite(template, values.podTemplate?.merge), values.podTemplate?.patch);
    pod = template.spec;
    conf = natsConf(values.config, root);
  }

  // 4. A valid Pod, wired as the project's chart wires it.
  const { Pod } = requireTool('kubernetes-models/v1/Pod');
  new Pod({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'nats-0' }, spec: pod }).validate();
  const byName = Object.fromEntries([...(pod.initContainers ?? []), ...pod.containers].map((c) => [c.name, c]));
  const init = byName['render-users'];
  const sidecar = byName['mesh-reconciler'];
  nats = byName.nats;
  check(init && (pod.initContainers ?? []).includes(init), 'no init container render-users');
  check(sidecar && pod.containers.includes(sidecar), 'no sidecar mesh-reconciler');
  check(pod.shareProcessNamespace === true, 'shareProcessNamespace is not true');
  check(util.isDeepStrictEqual(env(init), env(sidecar)), 'render-users and the sidecar have different MESH_RECONCILER_* settings');
  check(env(sidecar).MESH_RECONCILER_USERS_SCOPE === 'account', 'the users scope is not account');
  const usersFile = env(sidecar).MESH_RECONCILER_USERS_FILE;
  check(init.args.includes('--out') && init.args[init.args.indexOf('--out') + 1] === usersFile, 'render-users --out is not MESH_RECONCILER_USERS_FILE');
  const usersVolume = (c) => {
    const m = (c.volumeMounts ?? []).find((v) => usersFile.startsWith(`${v.mountPath}/`));
    check(m, `${c.name}: ${usersFile} is on no volume`);
    return m;
  };
  const usersMount = usersVolume(sidecar);
  check(usersVolume(init).name === usersMount.name && usersVolume(nats).name === usersMount.name, 'the users folder is not one volume for init, sidecar and nats');
  check(!usersMount.readOnly && !usersVolume(init).readOnly, 'the users folder is read-only for a writer');
  check(pod.volumes.some((v) => v.name === usersMount.name && v.emptyDir), 'the users volume is not an emptyDir');
  check(env(sidecar).MESH_RECONCILER_PID_FILE === '/var/run/nats/nats.pid' && mountOf(sidecar, 'pid')?.mountPath === '/var/run/nats', 'the sidecar does not read the chart\'s pid file');
  check(byName.reloader.volumeMounts.some((m) => m.name === usersMount.name), 'the reloader does not see the users folder');
  const uid = pod.securityContext?.runAsUser;
  check(Number.isInteger(uid) && uid > 0, 'no pod-level non-root runAsUser');
  for (const c of Object.values(byName)) check((c.securityContext?.runAsUser ?? uid) === uid, `${c.name} runs as another user`);

  // 5. nats.conf, and the include that points at the users file.
  const include = conf.match(/^\s*include\s+(\S+?);?\s*$/m)?.[1];
  check(include, 'nats.conf has no include');
  check(path.posix.resolve(kConfigDir, include) === usersFile, `nats.conf includes ${include}, the reconciler writes ${usersFile}`);
  check(/"accounts": \{\s*(?:[\s\S]*?)include /.test(conf), 'the include is not inside the accounts block');
  fs.mkdirSync(`${root}${kConfigDir}`, { recursive: true });
  fs.mkdirSync(`${root}${path.posix.dirname(usersFile)}`, { recursive: true });
  fs.mkdirSync(`${root}/var/run/nats`, { recursive: true });
  fs.mkdirSync(`${root}/data`, { recursive: true });
  fs.writeFileSync(`${root}${kConfigDir}/nats.conf`, `${conf}\n`);
  console.log(`${rendered ? 'official chart' : 'stand-in'} render ok: init container, sidecar, users folder ${usersMount.name}, pid file, uid ${uid}; ` +
              `${root}${kConfigDir}/nats.conf includes ${include}; users file ${root}${usersFile}`);
});
