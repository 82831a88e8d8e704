// Lays out one pod of the chart's StatefulSet (the first replica, or --ordinal N) on this
// machine, so that the containers' own commands can run on loopback:
//   - every volume of the pod becomes a folder ROOT/<mountPath> (Secrets and ConfigMaps are
//     written out from the rendered manifests, emptyDirs and claim templates are empty);
//   - every container gets a launcher ROOT/run/<container>.sh that runs its command and args
//     with its environment (literal values, fieldRefs, secretKeyRefs resolved from the
//     manifests; $(NAME) in a value replaced as Kubernetes does) and nothing else from ours but
//     PATH.
// Absolute paths under a mount point, in args, env values and ConfigMap contents, are mapped to
// ROOT/<path>; 0.0.0.0 becomes 127.0.0.1; each --host NAME=ADDRESS replaces the text NAME by
// ADDRESS (the cluster routes' pod DNS names, which do not resolve here). Nothing else is
// changed: ports are the chart's (render it with free ones; one rendering per pod when several
// run side by side). A launcher given arguments runs the container's command with those
// instead of its args (like `kubectl exec -c NAME -- COMMAND ARGS`, paths mapped).
//
// Usage: node tests/charts/pod.mjs RENDERED.yaml --root DIR --bin NAME=PATH... [--extra FILE...]
//                                  [--ordinal N] [--host NAME=ADDRESS...] [--pod NAME]
//   --bin      what each container's command[0] runs here (mesh-reconciler=..., nats-server=...)
//   --extra    more manifests (e.g. a TLS Secret that the chart only names)
//   --ordinal  which replica this is (its pod name <statefulset>-N; default 0)
//   --host     a text to replace, e.g. POD.HEADLESS.NS.svc.cluster.local:6222=127.0.0.1:16222
//   --pod      lay out the bare Pod of that name (e.g. the `helm test` Pod) instead
// Prints the pod name and each launcher.
import fs from 'node:fs';
import path from 'node:path';

import { allContainers, check, main, objectData, objectKeys, readManifests, statefulSet } from './lib.mjs';

function shellQuote(word) {
  return `'${String(word).replaceAll("'", "'\\''")}'`;
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function parseArgs(argv) {
  const options = { bins: {}, extra: [], ordinal: 0, hosts: [] };
  options.file = argv.shift();
  while (argv.length > 0) {
    const flag = argv.shift();
    const value = argv.shift();
    check(value !== undefined, `${flag} needs a value`);
    if (flag === '--root') options.root = path.resolve(value);
    else if (flag === '--bin') {
      const [name, bin] = value.split('=');
      options.bins[name] = bin;
    } else if (flag === '--extra') options.extra.push(value);
    else if (flag === '--pod') options.podName = value;
    else if (flag === '--ordinal') {
      options.ordinal = Number(value);
      check(Number.isInteger(options.ordinal) && options.ordinal >= 0, `--ordinal ${value}: not a replica number`);
    } else if (flag === '--host') {
      const at = value.indexOf('=');
      check(at > 0, `--host ${value}: expected NAME=ADDRESS`);
      options.hosts.push([value.slice(0, at), value.slice(at + 1)]);
    }
    else check(false, `unknown flag ${flag}`);
  }
  check(options.file && options.root, 'usage: pod.mjs RENDERED.yaml --root DIR --bin NAME=PATH...');
  return options;
}

await main(async (argv) => {
  const options = parseArgs(argv);
  const docs = [options.file, ...options.extra].flatMap((f) => readManifests(f).map((m) => m.doc));
  let pod, podName, namespace, claims;
  if (options.podName) {
    const bare = docs.find((d) => d.kind === 'Pod' && d.metadata?.name === options.podName);
    check(bare, `no Pod ${options.podName} in the manifests`);
    ({ spec: pod } = bare);
    podName = options.podName;
    namespace = bare.metadata.namespace ?? 'default';
    claims = [];
  } else {
    const { sts, pod: template } = statefulSet(docs);
    check(options.ordinal < (sts.spec.replicas ?? 1), `--ordinal ${options.ordinal}: the StatefulSet has ${sts.spec.replicas ?? 1} replica(s)`);
    pod = template;
    podName = `${sts.metadata.name}-${options.ordinal}`;
    namespace = sts.metadata.namespace ?? 'default';
    claims = sts.spec.volumeClaimTemplates ?? [];
  }
  const containers = allContainers(pod);
  const root = options.root;

  // Path mapping: one pass over all mount points, longest first, whole path components only.
  const mountPaths = [...new Set(containers.flatMap((c) => (c.volumeMounts ?? []).map((m) => m.mountPath)))]
    .sort((a, b) => b.length - a.length);
  const pattern = new RegExp(
    `(?<![\\w./-])(${mountPaths.map(escapeRegExp).join('|')})(?=[/"'\\s,;\\]]|$)|0\\.0\\.0\\.0`, 'g');
  const mapHosts = (text) => options.hosts.reduce((t, [name, address]) => t.replaceAll(name, address), text);
  const mapText = (text) =>
    mapHosts(mountPaths.length === 0 ? text : text.replace(pattern, (all, mount) => (mount ? `${root}${mount}` : '127.0.0.1')));

  const lookup = (kind, name) => {
    const doc = docs.find((d) => d.kind === kind && d.metadata?.name === name);
    check(doc, `${kind} ${name} is not in the rendered manifests (an existing one? pass it with --extra)`);
    return doc;
  };

  const writeFile = (file, bytes, mode, map) => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, map ? mapText(bytes.toString()) : bytes);
    if (mode !== undefined) fs.chmodSync(file, mode);
  };

  const writeSource = (dir, kind, name, items, mode) => {
    const doc = lookup(kind, name);
    const entries = items ?? objectKeys(doc).map((key) => ({ key, path: key }));
    for (const item of entries) {
      const bytes = objectData(doc, item.key);
      check(bytes, `${kind} ${name} has no key ${item.key}`);
      writeFile(path.join(dir, item.path), bytes, item.mode ?? mode, kind === 'ConfigMap');
    }
  };

  // Volumes: created at their first mount point, later mount points link to it.
  const volumeDirs = {};
  for (const container of containers) {
    for (const mount of container.volumeMounts ?? []) {
      check(!mount.subPath, `${container.name}: subPath mounts are not supported`);
      const dir = `${root}${mount.mountPath}`;
      if (volumeDirs[mount.name]) {
        if (volumeDirs[mount.name] !== dir) {
          fs.mkdirSync(path.dirname(dir), { recursive: true });
          fs.symlinkSync(volumeDirs[mount.name], dir);
        }
        continue;
      }
      volumeDirs[mount.name] = dir;
      fs.mkdirSync(dir, { recursive: true });
      const volume = (pod.volumes ?? []).find((v) => v.name === mount.name);
      if (!volume) {
        check(claims.some((t) => t.metadata.name === mount.name),
              `${container.name}: volume ${mount.name} is not defined`);
        continue;
      }
      if (volume.configMap) writeSource(dir, 'ConfigMap', volume.configMap.name, volume.configMap.items, volume.configMap.defaultMode);
      if (volume.secret) writeSource(dir, 'Secret', volume.secret.secretName, volume.secret.items, volume.secret.defaultMode);
      for (const source of volume.projected?.sources ?? []) {
        if (source.secret) writeSource(dir, 'Secret', source.secret.name, source.secret.items, volume.projected.defaultMode);
        if (source.configMap) writeSource(dir, 'ConfigMap', source.configMap.name, source.configMap.items, volume.projected.defaultMode);
      }
    }
  }

  const fieldValue = (fieldPath) => {
    const values = { 'metadata.name': podName, 'metadata.namespace': namespace, 'status.podIP': '127.0.0.1' };
    check(fieldPath in values, `fieldRef ${fieldPath} is not supported`);
    return values[fieldPath];
  };

  // Kubernetes replaces $(NAME) in a value by an earlier variable of the same container ($$ is a
  // literal $; an unknown NAME stays as written).
  const expand = (text, known) =>
    text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all, name) =>
      name === undefined ? '$' : (known.has(name) ? known.get(name) : all));

  const envOf = (container) => {
    const known = new Map();
    return (container.env ?? []).map((e) => {
      let value;
      if ('value' in e) value = expand(mapText(String(e.value)), known);
      else if (e.valueFrom?.fieldRef) value = fieldValue(e.valueFrom.fieldRef.fieldPath);
      else if (e.valueFrom?.secretKeyRef) {
        const ref = e.valueFrom.secretKeyRef;
        const bytes = objectData(lookup('Secret', ref.name), ref.key);
        check(bytes, `Secret ${ref.name} has no key ${ref.key}`);
        value = bytes.toString();
      } else check(false, `${container.name}: env ${e.name} is not supported`);
      known.set(e.name, value);
      return [e.name, value];
    });
  };

  // Launchers.
  const runDir = path.join(root, 'run');
  fs.mkdirSync(runDir, { recursive: true });
  const mapCases = mountPaths
    .map((m) => `    ${shellQuote(m)}|${shellQuote(m)}/*) printf '%s' ${shellQuote(root)}"$1" ;;`)
    .join('\n');
  for (const container of containers) {
    const command = container.command ?? [];
    check(command.length > 0, `${container.name}: no command (the image's entrypoint is not known here)`);
    const bin = options.bins[command[0]];
    check(bin, `${container.name}: no --bin for ${command[0]}`);
    const argv = [bin, ...command.slice(1).map(mapText)];
    const args = (container.args ?? []).map(mapText);
    const env = envOf(container).map(([k, v]) => `${k}=${shellQuote(v)}`);
    const launcher = path.join(runDir, `${container.name}.sh`);
    fs.writeFileSync(launcher, `#!/usr/bin/env bash
# Container ${container.name} of pod ${podName}, paths under ${root}.
# Without arguments: its command and args. With arguments: its command and those (paths mapped).
map() {
  case "$1" in
${mapCases}
    *) printf '%s' "$1" ;;
  esac
}
if [[ $# -gt 0 ]]; then
  mapped=()
  for arg in "$@"; do mapped+=("$(map "$arg")"); done
  set -- ${argv.map(shellQuote).join(' ')} "\${mapped[@]}"
else
  set -- ${[...argv, ...args].map(shellQuote).join(' ')}
fi
exec env -i PATH="$PATH" ${env.join(' ')} "$@"
`, { mode: 0o755 });
    console.log(`${container.init ? 'init ' : ''}container ${container.name}: ${launcher}`);
  }
  console.log(`pod ${podName} laid out under ${root}`);
});
