// Derives, from a rendered StatefulSet (helm template), the Pod that `podman kube play` 4.3.1
// can run: what a StatefulSet controller and a kubelet would make of replica N, changing no more
// than podman needs. Each change, and why (podman 4.3.1 here; docs/kubernetes.md, "podman"):
//   1. kind: Pod named <statefulset>-N (4.3.1 ignores a StatefulSet silently), with the
//      template's labels, the pod-name label, hostname and subdomain the controller sets.
//   2. Annotations whose value exceeds 63 characters are dropped (podman refuses them; the
//      chart's checksum/config is a 64-character sha256, which only rolls pods).
//   3. restartPolicy: OnFailure instead of Always: podman gives init containers the pod's
//      policy, and with Always it restarts the finished init container forever.
//   4. projected and secret volumes become hostPath volumes of a folder written here with the
//      files the kubelet would present (items, defaultMode 0440, owned root:fsGroup), in the
//      kubelet's layout: the files are links through ..data to a timestamped folder, swapped
//      atomically on a change (podman refuses projected volumes; its secret volumes hold the
//      values still base64-encoded and ignore items and defaultMode).
//   5. emptyDir volumes are renamed <pod>-<volume>: podman makes them named volumes shared by
//      every pod naming the same volume, where the kubelet gives each pod its own.
//   6. The volume claim template becomes a persistentVolumeClaim <template>-<pod> (the claim
//      the controller would create); the test creates the podman volume first, owned by the
//      pod's fsGroup (podman ignores fsGroup).
//   7. Containers' ports are removed, and probes name their port by number: podman 4.3.1
//      publishes every containerPort on the host at the same port (0.0.0.0:4222...), where a
//      kubelet publishes none without hostPort; two pods (or anything else on the machine)
//      would collide. The pods are reached at their own addresses on the podman network.
//   8. $(VAR) references in env values are expanded from the container's earlier variables,
//      as the kubelet does (podman 4.3.1 passes them literally: the official chart's
//      SERVER_NAME=$(POD_NAME) reached nats-server as "$(POD_NAME)", and it refused to start).
//      Variables from a secretKeyRef are set to the Secret's value first (as the kubelet
//      injects them; podman 4.3.1 looks the name up among podman's own secrets, which the test
//      does not create), so that $(MESH_ROUTE_PASSWORD) in the route URLs is expanded.
//   9. --host-alias NAME=IP adds hostAliases, for the cluster routes' pod DNS names
//      (<pod>.<headless service>.<namespace>.svc.<domain>), which nothing resolves here.
// Probes are kept but podman does not run them (readiness/startup ignored; liveness needs
// systemd): the test queries their endpoints itself. The ConfigMaps the pod mounts are written
// beside it (podman plays them); Secrets are not (they are the hostPath folders).
//
// Usage: node kube-pod.mjs RENDERED.yaml --ordinal N --out POD.yaml --host-dir DIR
//                          [--host-alias NAME=IP...] [--extra MANIFESTS.yaml...]
//   --extra: Secrets the rendering only names (the official chart's overlay's).
// Prints, one a line: "pod NAME", "claim VOLUME_NAME", "emptydir VOLUME_NAME",
// "hostdir VOLUME DIR", "configmap NAME", "dropped-annotation KEY".
import fs from 'node:fs';
import path from 'node:path';

import { YAML, check, findMaybe, main, objectData, readManifests, volumeFiles } from '../charts/lib.mjs';

function parseArgs(argv) {
  const options = { ordinal: 0, aliases: [] };
  options.file = argv.shift();
  while (argv.length > 0) {
    const flag = argv.shift();
    const value = argv.shift();
    check(value !== undefined, `${flag} needs a value`);
    if (flag === '--ordinal') options.ordinal = Number(value);
    else if (flag === '--out') options.out = value;
    else if (flag === '--extra') (options.extra ??= []).push(value);
    else if (flag === '--host-dir') options.hostDir = path.resolve(value);
    else if (flag === '--host-alias') {
      const at = value.indexOf('=');
      check(at > 0, `--host-alias ${value}: expected NAME=IP`);
      options.aliases.push([value.slice(0, at), value.slice(at + 1)]);
    } else check(false, `unknown flag ${flag}`);
  }
  check(options.file && options.out && options.hostDir, 'usage: kube-pod.mjs RENDERED.yaml --out POD.yaml --host-dir DIR');
  return options;
}

// The kubelet's atomic writer: DIR/..<stamp>/<files>, DIR/..data -> ..<stamp>, DIR/<file> ->
// ..data/<file>.
function writeAtomic(dir, files, mode, gid) {
  fs.mkdirSync(dir, { recursive: true });
  const stamp = `..${new Date().toISOString().replace(/[-:.]/g, '_')}.${process.pid}`;
  const version = path.join(dir, stamp);
  fs.mkdirSync(version, { mode: 0o755 });
  for (const [name, bytes] of Object.entries(files)) {
    const file = path.join(version, name);
    fs.writeFileSync(file, bytes, { mode });
    fs.chmodSync(file, mode);
    fs.chownSync(file, 0, gid);
    const link = path.join(dir, name);
    if (!fs.existsSync(link)) fs.symlinkSync(path.posix.join('..data', name), link);
  }
  fs.symlinkSync(stamp, path.join(dir, '..data_tmp'));
  fs.renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
}

await main(async (argv) => {
  const options = parseArgs(argv);
  const docs = [options.file, ...(options.extra ?? [])].flatMap((f) => readManifests(f).map((m) => m.doc));
  const sts = docs.find((d) => d.kind === 'StatefulSet');
  check(sts, 'no StatefulSet in the rendering');
  const template = structuredClone(sts.spec.template);
  const podName = `${sts.metadata.name}-${options.ordinal}`;
  const namespace = sts.metadata.namespace ?? 'default';
  const spec = template.spec;
  const report = [`pod ${podName}`];

  // 1, 2
  const annotations = {};
  for (const [key, value] of Object.entries(template.metadata.annotations ?? {})) {
    if (String(value).length > 63) report.push(`dropped-annotation ${key}`);
    else annotations[key] = value;
  }
  const metadata = {
    name: podName,
    namespace,
    labels: { ...template.metadata.labels, 'statefulset.kubernetes.io/pod-name': podName },
  };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  spec.hostname = podName;
  spec.subdomain = sts.spec.serviceName;
  // 3
  spec.restartPolicy = 'OnFailure';
  // 4, 5
  const gid = spec.securityContext?.fsGroup ?? 0;
  const renamed = {};
  const volumes = [];
  for (const volume of spec.volumes ?? []) {
    if (volume.projected || volume.secret) {
      const files = {};
      for (const [file, ref] of Object.entries(volumeFiles(volume))) {
        const doc = findMaybe(docs, ref.kind, ref.name);
        check(doc, `volume ${volume.name}: ${ref.kind} ${ref.name} is not in the rendering`);
        check(file !== '*', `volume ${volume.name}: a whole ${ref.kind} without items is not supported here`);
        const bytes = objectData(doc, ref.key);
        check(bytes !== undefined, `volume ${volume.name}: ${ref.kind} ${ref.name} has no key ${ref.key}`);
        files[file] = bytes;
      }
      const mode = volume.projected?.defaultMode ?? volume.secret?.defaultMode ?? 0o644;
      const dir = path.join(options.hostDir, volume.name);
      writeAtomic(dir, files, mode, gid);
      fs.chmodSync(dir, 0o755);
      volumes.push({ name: volume.name, hostPath: { path: dir, type: 'Directory' } });
      report.push(`hostdir ${volume.name} ${dir}`);
    } else if (volume.emptyDir) {
      renamed[volume.name] = `${podName}-${volume.name}`;
      volumes.push({ ...volume, name: renamed[volume.name] });
      report.push(`emptydir ${renamed[volume.name]}`);
    } else {
      volumes.push(volume);
    }
  }
  // 6
  for (const claim of sts.spec.volumeClaimTemplates ?? []) {
    const claimName = `${claim.metadata.name}-${podName}`;
    volumes.push({ name: claim.metadata.name, persistentVolumeClaim: { claimName } });
    report.push(`claim ${claimName}`);
  }
  spec.volumes = volumes;
  for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
    for (const mount of container.volumeMounts ?? []) {
      if (renamed[mount.name]) mount.name = renamed[mount.name];
    }
  }
  // 7
  for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const get = container[probe]?.httpGet;
      if (get && typeof get.port === 'string') {
        const port = (container.ports ?? []).find((p) => p.name === get.port);
        check(port, `container ${container.name}: ${probe} names port ${get.port}, which it does not have`);
        get.port = port.containerPort;
      }
    }
    delete container.ports;
  }
  // 8
  const fieldValue = (path) => ({ 'metadata.name': podName, 'metadata.namespace': namespace })[path];
  for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
    const known = {};
    for (const env of container.env ?? []) {
      if (typeof env.value === 'string') {
        env.value = env.value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g,
          (all, name) => (name === undefined ? '$' : (known[name] ?? all)));
        known[env.name] = env.value;
      } else if (env.valueFrom?.fieldRef) {
        const value = fieldValue(env.valueFrom.fieldRef.fieldPath);
        if (value !== undefined) known[env.name] = value;
      } else if (env.valueFrom?.secretKeyRef) {
        const ref = env.valueFrom.secretKeyRef;
        const secret = findMaybe(docs, 'Secret', ref.name);
        check(secret, `container ${container.name}: env ${env.name} names Secret ${ref.name}, which is not in the rendering (pass it with --extra)`);
        const bytes = objectData(secret, ref.key);
        check(bytes, `Secret ${ref.name} has no key ${ref.key}`);
        env.value = bytes.toString();
        delete env.valueFrom;
        known[env.name] = env.value;
      }
    }
  }
  // 9
  if (options.aliases.length > 0) {
    spec.hostAliases = options.aliases.map(([hostname, ip]) => ({ ip, hostnames: [hostname] }));
  }

  const out = [];
  for (const volume of volumes) {
    if (!volume.configMap) continue;
    const configMap = findMaybe(docs, 'ConfigMap', volume.configMap.name);
    check(configMap, `ConfigMap ${volume.configMap.name} is not in the rendering`);
    out.push(configMap);
    // podman keeps a played ConfigMap as a named volume of its name.
    report.push(`configmap ${configMap.metadata.name}`);
  }
  out.push({ apiVersion: 'v1', kind: 'Pod', metadata, spec });
  fs.writeFileSync(options.out, out.map((d) => YAML.stringify(d)).join('---\n'));
  console.log(report.join('\n'));
});
