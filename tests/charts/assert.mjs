// Structural assertions on a `helm template` output of the mesh-reconciler chart.
//
// Usage: node tests/charts/assert.mjs RENDERED.yaml CHECK [ARG...]
//   pod                    the pod's wiring: shared volumes, pid file, init container, probes,
//                          ports, users, security contexts, credentials only from Secrets
//   cluster N [open]       N members: replicas, routes through the headless Service (with the
//                          route credential; open: routes.authorization false), PDB
//   monitoring KIND|none [RUNBOOK_BASE_URL]
//                          PodMonitor / ServiceMonitor / none, and the PrometheusRule
//   no-rules               no PrometheusRule
//   confined VALUE...      each VALUE (and its base64) appears in no document but a Secret
//   extras                 imagePullSecrets, ServiceAccount, extra containers/volumes/env and
//                          nats.extraConfig as chart_test.sh renders them
//   jetstream-only         reconciler.usersFile: none: no users file anywhere
//   helm-test              the `helm test` Pod runs plan against the client Service
//   official-monitoring RELEASE
//                          the official chart with the overlay: PodMonitor (job of the rules,
//                          bus RELEASE), PrometheusRule and dashboard ConfigMap
// Each check prints what it verified; the first failed assertion exits 1 naming it.
import fs from 'node:fs';
import path from 'node:path';
import util from 'node:util';

import {
  YAML, allContainers, check, docName, envValue, findOne, flagValue, locate, main, natsIncludes,
  natsSetting, objectData, objectKeys, portOf, readManifests, repoRoot, statefulSet, volumeFiles,
} from './lib.mjs';

const kRulesFile = path.join(repoRoot, 'charts/mesh-reconciler/files/alert-rules.yaml');

// The file an absolute path of a container resolves to, as "<volume>:<relative path>", so
// that two containers' paths can be compared whatever their mount points.
function where(pod, container, file, what) {
  check(file && path.posix.isAbsolute(file), `${container.name}: ${what} is not an absolute path: ${file}`);
  const at = locate(pod, container, file);
  check(at, `${container.name}: ${what} ${file} is on no volume`);
  return { ...at, id: `${at.volume.name}:${at.rel}` };
}

function natsConfig(docs, pod, nats) {
  const configPath = flagValue(nats.command.concat(nats.args ?? []), '--config');
  const at = where(pod, nats, configPath, 'the --config file');
  const name = at.volume.configMap?.name;
  check(name, `nats: ${configPath} is not from a ConfigMap volume`);
  const bytes = objectData(findOne(docs, 'ConfigMap', name), at.rel);
  check(bytes, `ConfigMap ${name} has no key ${at.rel}`);
  return { configPath, conf: bytes.toString() };
}

function effective(pod, container, key) {
  return container.securityContext?.[key] ?? pod.securityContext?.[key];
}

function checkSecurity(pod, container) {
  const sc = container.securityContext ?? {};
  const n = container.name;
  check(effective(pod, container, 'runAsNonRoot') === true, `${n}: runAsNonRoot is not true`);
  check(sc.readOnlyRootFilesystem === true, `${n}: readOnlyRootFilesystem is not true`);
  check(sc.allowPrivilegeEscalation === false, `${n}: allowPrivilegeEscalation is not false`);
  check((sc.capabilities?.drop ?? []).includes('ALL'), `${n}: capabilities do not drop ALL`);
  check(!(sc.capabilities?.add ?? []).length, `${n}: adds capabilities`);
  check(sc.privileged !== true, `${n}: privileged`);
  check(effective(pod, container, 'seccompProfile')?.type === 'RuntimeDefault', `${n}: seccomp is not RuntimeDefault`);
}

function probePort(container, probe, what) {
  const port = probe?.httpGet?.port;
  check(port !== undefined, `${container.name}: no HTTP ${what}`);
  if (typeof port === 'number') return port;
  const named = (container.ports ?? []).find((p) => p.name === port);
  check(named, `${container.name}: ${what} names port "${port}", which the container does not declare`);
  return named.containerPort;
}

// A credential file: a projected/secret volume file from a Secret.
function secretFile(docs, pod, container, file, what) {
  const at = where(pod, container, file, what);
  const source = volumeFiles(at.volume)[at.rel] ?? volumeFiles(at.volume)['*'];
  check(source?.kind === 'Secret', `${container.name}: ${what} ${file} does not come from a Secret`);
  return at;
}

function checkPod(docs) {
  const { sts, pod, byName } = statefulSet(docs);
  const init = byName['render-users'];
  const nats = byName.nats;
  const sidecar = byName['mesh-reconciler'];
  check(init?.init, 'no init container render-users');
  check(nats && !nats.init, 'no container nats');
  check(sidecar && !sidecar.init, 'no container mesh-reconciler');
  check(pod.shareProcessNamespace === true, 'shareProcessNamespace is not true');
  check(pod.automountServiceAccountToken === false, 'the service account token is mounted');

  // The init container renders the users file from the records, before nats-server starts.
  check(init.command?.[0] === 'mesh-reconciler' && init.args?.[0] === 'render-users',
        `init container does not run mesh-reconciler render-users: ${JSON.stringify(init.command.concat(init.args))}`);
  const out = where(pod, init, flagValue(init.args, '--out'), '--out');
  check(out.volume.emptyDir, `render-users writes to ${out.volume.name}, not an emptyDir`);
  check(!out.mount.readOnly, 'render-users mounts the users folder read-only');
  // One place for the pass settings: the init container has exactly the sidecar's, so that it
  // renders the identity (lease permission, users scope) the daemon's first pass wants.
  // The sidecar's MESH_RECONCILER_REMOTE and _TOKEN_FILE name its own daemon for on-call's
  // commands: not pass settings.
  const session = new Set(['MESH_RECONCILER_REMOTE', 'MESH_RECONCILER_TOKEN_FILE']);
  const settings = (c) => Object.fromEntries((c.env ?? []).filter((e) => e.name.startsWith('MESH_RECONCILER_') && !session.has(e.name))
    .map((e) => [e.name, JSON.stringify(e.value ?? e.valueFrom)]));
  check(util.isDeepStrictEqual(settings(init), settings(sidecar)),
        `render-users and the sidecar have different MESH_RECONCILER_* settings: ${JSON.stringify(settings(init))} vs ${JSON.stringify(settings(sidecar))}`);
  for (const flag of ['--prune', '--lease', '--users-scope', '--records', '--user', '--password-file']) {
    check(!(sidecar.args ?? []).includes(flag) && !(init.args ?? []).includes(flag),
          `${flag} is an argument: it belongs in the shared environment`);
  }
  const records = secretFile(docs, pod, init, envValue(init, 'MESH_RECONCILER_RECORDS'), 'the records');
  const initPassword = secretFile(docs, pod, init, envValue(init, 'MESH_RECONCILER_PASSWORD_FILE'), 'MESH_RECONCILER_PASSWORD_FILE');
  // nats-server includes that very file, and writes its pid where the sidecar reads it.
  const { configPath, conf } = natsConfig(docs, pod, nats);
  const includes = natsIncludes(conf);
  check(includes.length === 1, `nats.conf has ${includes.length} include lines, expected 1`);
  const included = path.posix.resolve(path.posix.dirname(configPath), includes[0]);
  const natsUsers = where(pod, nats, included, `the included file (${includes[0]} from ${configPath})`);
  check(natsUsers.id === out.id, `nats includes ${natsUsers.id}, render-users writes ${out.id}`);
  const sidecarUsers = where(pod, sidecar, envValue(sidecar, 'MESH_RECONCILER_USERS_FILE'), 'MESH_RECONCILER_USERS_FILE');
  check(sidecarUsers.id === out.id, `the sidecar writes ${sidecarUsers.id}, nats includes ${out.id}`);
  check(!sidecarUsers.mount.readOnly, 'the sidecar mounts the users folder read-only');
  // Clients' accounts and users are the users file's; the cluster block's authorization is the
  // routes' (checked by `cluster`).
  const outsideCluster = conf.replace(/^\s*cluster\s*{[\s\S]*?^\s*}/m, '');
  check(!/^\s*(accounts|authorization)\s*[{:]/m.test(outsideCluster), 'nats.conf defines accounts or authorization itself');

  const natsPid = where(pod, nats, natsSetting(conf, 'pid_file'), 'pid_file');
  check(natsPid.volume.emptyDir, 'the pid file is not on an emptyDir');
  const sidecarPid = where(pod, sidecar, envValue(sidecar, 'MESH_RECONCILER_PID_FILE'), 'MESH_RECONCILER_PID_FILE');
  check(sidecarPid.id === natsPid.id, `the sidecar reads the pid from ${sidecarPid.id}, nats writes ${natsPid.id}`);
  const store = where(pod, nats, natsSetting(conf, 'store_dir'), 'the JetStream store_dir');
  check(store.volume.claimTemplate &&
        (sts.spec.volumeClaimTemplates ?? []).some((t) => t.metadata.name === store.volume.name),
        'the JetStream store is not on a volumeClaimTemplate');
  // A standalone server: the sidecar reads that store (read only) to see a deleted stream's old
  // folder go; a cluster's sidecar neither mounts nor names it.
  const storeDir = envValue(sidecar, 'MESH_RECONCILER_STORE_DIR');
  if ((sts.spec.replicas ?? 1) === 1) {
    const sidecarStore = where(pod, sidecar, storeDir ?? '', 'MESH_RECONCILER_STORE_DIR');
    check(storeDir === natsSetting(conf, 'store_dir'),
          `MESH_RECONCILER_STORE_DIR ${storeDir} is not nats' store_dir ${natsSetting(conf, 'store_dir')}`);
    check(sidecarStore.id === store.id, `the sidecar reads ${sidecarStore.id}, nats stores in ${store.id}`);
    check(sidecarStore.mount.readOnly === true, 'the sidecar mounts the JetStream store writable');
  } else {
    check(storeDir === undefined, 'a clustered sidecar has MESH_RECONCILER_STORE_DIR');
    check(!(sidecar.volumeMounts ?? []).some((m) => m.name === store.volume.name),
          'a clustered sidecar mounts the JetStream store');
  }

  // The sidecar reaches nats-server on loopback, at the ports nats.conf listens on.
  const monitor = new URL(envValue(sidecar, 'MESH_RECONCILER_MONITOR'));
  check(monitor.hostname === '127.0.0.1' && Number(monitor.port) === portOf(natsSetting(conf, 'http')),
        `MESH_RECONCILER_MONITOR ${monitor} is not nats' http ${natsSetting(conf, 'http')} on loopback`);
  const bus = new URL(envValue(sidecar, 'MESH_RECONCILER_BUS'));
  check(bus.hostname === '127.0.0.1' && Number(bus.port) === portOf(natsSetting(conf, 'listen')),
        `MESH_RECONCILER_BUS ${bus} is not nats' listen ${natsSetting(conf, 'listen')} on loopback`);

  // Probes: the sidecar's on its --listen port, named "metrics": Ready after a first good pass
  // (startup on /readyz), then alive and ready while its loop beats (/healthz).
  check(sidecar.command?.[0] === 'mesh-reconciler' && sidecar.args?.[0] === 'run', 'the sidecar does not run `mesh-reconciler run`');
  const listen = portOf(flagValue(sidecar.args, '--listen'));
  const metrics = (sidecar.ports ?? []).find((p) => p.name === 'metrics');
  check(metrics?.containerPort === listen, `port "metrics" is ${metrics?.containerPort}, --listen is ${listen}`);
  // nats' readiness must not fail on one unhealthy stream (2.10+ /healthz checks each).
  check(nats.readinessProbe?.httpGet?.path === '/healthz?js-server-only=true',
        `nats readinessProbe is ${nats.readinessProbe?.httpGet?.path}, expected /healthz?js-server-only=true`);
  for (const [probe, pathWanted] of [['startupProbe', '/readyz'], ['livenessProbe', '/healthz'], ['readinessProbe', '/healthz']]) {
    check(sidecar[probe]?.httpGet?.path === pathWanted, `sidecar ${probe} is not on ${pathWanted}`);
    check(probePort(sidecar, sidecar[probe], probe) === listen, `sidecar ${probe} is not on port ${listen}`);
  }
  const natsHttp = portOf(natsSetting(conf, 'http'));
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
    check(nats[probe]?.httpGet?.path?.startsWith('/healthz') && probePort(nats, nats[probe], probe) === natsHttp,
          `nats ${probe} is not on the monitoring port ${natsHttp}`);
  }

  // On-call's commands in the sidecar (reconcile, hold, release) ask its own daemon, with the
  // daemon's token, without flags (NOTES.txt).
  check(envValue(sidecar, 'MESH_RECONCILER_REMOTE') === `http://127.0.0.1:${listen}`,
        `sidecar MESH_RECONCILER_REMOTE is ${envValue(sidecar, 'MESH_RECONCILER_REMOTE')}, not its listener on 127.0.0.1:${listen}`);
  check(envValue(sidecar, 'MESH_RECONCILER_TOKEN_FILE') === flagValue(sidecar.args, '--token-file'),
        'sidecar MESH_RECONCILER_TOKEN_FILE is not the daemon\'s --token-file');

  // Credentials: files from Secrets; no env literal carries one.
  secretFile(docs, pod, sidecar, flagValue(sidecar.args, '--token-file'), '--token-file');
  const sidecarPassword = secretFile(docs, pod, sidecar, envValue(sidecar, 'MESH_RECONCILER_PASSWORD_FILE'), 'MESH_RECONCILER_PASSWORD_FILE');
  check(sidecarPassword.id === initPassword.id, 'init container and sidecar read different password files');
  const sidecarRecords = secretFile(docs, pod, sidecar, envValue(sidecar, 'MESH_RECONCILER_RECORDS'), 'MESH_RECONCILER_RECORDS');
  check(sidecarRecords.id === records.id, 'init container and sidecar read different records');
  for (const c of [init, nats, sidecar]) {
    for (const e of c.env ?? []) {
      check(!(/(PASSWORD|TOKEN|SECRET|CERTIFICATE)$/.test(e.name) && 'value' in e),
            `${c.name}: env ${e.name} has a literal value`);
    }
  }

  // One user for nats-server and the sidecar (signals), restrictive contexts everywhere.
  const natsUid = effective(pod, nats, 'runAsUser');
  check(Number.isInteger(natsUid) && natsUid > 0, 'nats-server has no non-root runAsUser');
  check(effective(pod, sidecar, 'runAsUser') === natsUid, 'nats-server and the sidecar run as different users');
  for (const c of [init, nats, sidecar]) checkSecurity(pod, c);

  console.log(`pod wiring ok: ${docName(sts)} (users file ${out.id}, pid file ${natsPid.id}, ` +
              `metrics port ${listen}, uid ${natsUid})`);
}

function checkCluster(docs, n, open) {
  const { sts, pod, byName } = statefulSet(docs);
  check(sts.spec.replicas === n, `replicas ${sts.spec.replicas}, expected ${n}`);
  const { conf } = natsConfig(docs, pod, byName.nats);
  const headless = findOne(docs, 'Service', sts.spec.serviceName);
  check(headless.spec.clusterIP === 'None', `Service ${headless.metadata.name} is not headless`);
  check(headless.spec.publishNotReadyAddresses === true, 'the headless Service hides not-ready pods');
  const pdb = docs.find((d) => d.kind === 'PodDisruptionBudget');
  // One actor on a cluster: every mesh-reconciler process of the pod runs with the lease when
  // there is more than one replica, and none needs it alone.
  for (const c of allContainers(pod).filter((c) => c.command?.[0] === 'mesh-reconciler')) {
    const lease = envValue(c, 'MESH_RECONCILER_LEASE');
    check(lease === (n > 1 ? '1' : '0'), `${c.name}: MESH_RECONCILER_LEASE is ${lease} with ${n} replicas`);
  }
  if (n === 1) {
    check(!/^\s*cluster\s*{/m.test(conf), 'a standalone server has a cluster block');
    check(!pdb, 'a standalone server has a PodDisruptionBudget');
    console.log('standalone ok: no cluster block, no PodDisruptionBudget');
    return;
  }
  const block = conf.match(/^\s*cluster\s*{([\s\S]*?)^\s*}/m)?.[1];
  check(block, 'no cluster block in nats.conf');
  const clusterPort = portOf(natsSetting(block, 'listen'));
  const ns = sts.metadata.namespace;
  // Closed routes (routes.authorization, the default): nats.conf takes the authorization block
  // and the routes from the nats container's environment, where Kubernetes puts the password in
  // from a secretKeyRef; every route carries the credential. Open: the routes are in nats.conf.
  let routeText = block;
  const env = (name) => (byName.nats.env ?? []).find((e) => e.name === name);
  if (open) {
    check(!/authorization/.test(block), 'routes.authorization false, but the cluster block has an authorization');
    check(!env('MESH_ROUTES'), 'routes.authorization false, but MESH_ROUTES is set');
  } else {
    check(/^\s*authorization\s*:\s*\$MESH_ROUTE_AUTH\s*$/m.test(block), 'the cluster block does not take its authorization from $MESH_ROUTE_AUTH');
    check(/^\s*routes\s*:\s*\$MESH_ROUTES\s*$/m.test(block), 'the cluster block does not take its routes from $MESH_ROUTES');
    check(env('MESH_ROUTE_PASSWORD')?.valueFrom?.secretKeyRef, 'MESH_ROUTE_PASSWORD is not from a Secret');
    const auth = env('MESH_ROUTE_AUTH')?.value ?? '';
    check(/password: "\$\(MESH_ROUTE_PASSWORD\)"/.test(auth), `MESH_ROUTE_AUTH ${auth} does not name $(MESH_ROUTE_PASSWORD)`);
    const user = auth.match(/user: "([^"]+)"/)?.[1];
    routeText = env('MESH_ROUTES')?.value ?? '';
    const urls = [...routeText.matchAll(/nats:\/\/[^\s,\]"]+/g)].map((m) => m[0]);
    check(urls.length === n && urls.every((u) => u.startsWith(`nats://${user}:$(MESH_ROUTE_PASSWORD)@`)),
          `not every route carries the credential of ${user}: ${routeText}`);
    routeText = routeText.replaceAll(`${user}:$(MESH_ROUTE_PASSWORD)@`, '');
  }
  const routes = [...routeText.matchAll(/nats:\/\/[^\s,\]"]+/g)].map((m) => m[0]).sort();
  const expected = [...Array(n).keys()]
    .map((i) => `nats://${sts.metadata.name}-${i}.${headless.metadata.name}.${ns}.svc.cluster.local:${clusterPort}`)
    .sort();
  check(util.isDeepStrictEqual(routes, expected), `routes ${JSON.stringify(routes)}, expected ${JSON.stringify(expected)}`);
  check((byName.nats.ports ?? []).some((p) => p.name === 'cluster' && p.containerPort === clusterPort), 'nats does not declare the cluster port');
  check(headless.spec.ports.some((p) => p.port === clusterPort), 'the headless Service lacks the cluster port');
  check(/^\s*server_name\s*:\s*\$POD_NAME\s*$/m.test(conf), 'server_name is not the pod name');
  check(pdb?.spec?.maxUnavailable === 1, 'no PodDisruptionBudget with maxUnavailable 1');
  console.log(`cluster ok: ${n} ${open ? 'open' : 'authenticated'} routes through ${headless.metadata.name}, PodDisruptionBudget`);
}

function checkMonitoring(docs, kind, runbookBaseUrl, release = undefined) {
  const { sts, byName } = statefulSet(docs);
  release ??= sts.metadata.name;
  const podLabels = sts.spec.template.metadata.labels;
  const selects = (selector, labels) => Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels?.[k] === v);
  const podMonitors = docs.filter((d) => d.kind === 'PodMonitor');
  const serviceMonitors = docs.filter((d) => d.kind === 'ServiceMonitor');
  // The job every rule selects (one, read from the rules), set by the scrape; and bus, by which
  // MeshLeaseHoldersNotOne counts, set to the release's name.
  const jobs = new Set([...fs.readFileSync(kRulesFile, 'utf8').matchAll(/job="([^"]*)"/g)].map((m) => m[1]));
  check(jobs.size === 1, `the rules select ${jobs.size} jobs: ${[...jobs]}`);
  const [job] = jobs;
  const jobRelabel = (e) => (e.relabelings ?? []).some((r) => r.targetLabel === 'job' && r.replacement === job) &&
    (e.relabelings ?? []).some((r) => r.targetLabel === 'bus' && r.replacement === release);
  if (kind === 'none') {
    check(podMonitors.length + serviceMonitors.length === 0, 'monitoring objects rendered while disabled');
    check(!docs.some((d) => d.kind === 'PrometheusRule'), 'a PrometheusRule rendered while monitoring is disabled');
    console.log('monitoring off ok: no PodMonitor, ServiceMonitor or PrometheusRule');
    return;
  }
  if (kind === 'PodMonitor') {
    check(podMonitors.length === 1 && serviceMonitors.length === 0, 'expected exactly one PodMonitor');
    const [endpoint] = podMonitors[0].spec.podMetricsEndpoints;
    check(selects(podMonitors[0].spec.selector, podLabels), 'the PodMonitor does not select the pods');
    check(endpoint.port === 'metrics' && byName['mesh-reconciler'].ports.some((p) => p.name === 'metrics'), 'the PodMonitor does not scrape port "metrics"');
    check(jobRelabel(endpoint), `the PodMonitor does not set job="${job}" and bus="${release}"`);
  } else {
    check(serviceMonitors.length === 1 && podMonitors.length === 0, 'expected exactly one ServiceMonitor');
    const [endpoint] = serviceMonitors[0].spec.endpoints;
    const services = docs.filter((d) => d.kind === 'Service' && selects(serviceMonitors[0].spec.selector, d.metadata.labels));
    check(services.length === 1, `the ServiceMonitor selects ${services.length} Services, expected 1`);
    check(services[0].spec.ports.some((p) => p.name === endpoint.port), `the selected Service has no port ${endpoint.port}`);
    check(selects({ matchLabels: services[0].spec.selector }, podLabels), 'the selected Service does not select the pods');
    check(jobRelabel(endpoint), `the ServiceMonitor does not set job="${job}" and bus="${release}"`);
  }
  const rule = findOne(docs, 'PrometheusRule');
  const expected = YAML.parse(fs.readFileSync(kRulesFile, 'utf8'));
  if (runbookBaseUrl) {
    for (const r of expected.groups.flatMap((g) => g.rules)) {
      r.annotations.runbook_url = `${runbookBaseUrl.replace(/\/$/, '')}/${r.annotations.runbook_url}`;
    }
  }
  check(util.isDeepStrictEqual(rule.spec, expected), 'the PrometheusRule differs from files/alert-rules.yaml');
  console.log(`monitoring ok: ${kind} scrapes port "metrics" as job=${job}, bus=${release}; PrometheusRule = files/alert-rules.yaml`);
}

// The official chart rendered with the overlay: its PodMonitor, PrometheusRule and dashboard
// ConfigMap (extraResources) as the project's chart has them; bus is the official release's name.
function checkOfficialMonitoring(docs, release) {
  checkMonitoring(docs, 'PodMonitor', undefined, release);
  const dashboards = docs.filter((d) => d.kind === 'ConfigMap' && d.metadata.labels?.grafana_dashboard === '1');
  check(dashboards.length === 1, `${dashboards.length} dashboard ConfigMaps, expected 1`);
  const json = Object.values(dashboards[0].data ?? {});
  const expected = JSON.parse(fs.readFileSync(path.join(repoRoot, 'charts/mesh-reconciler/dashboards/mesh-reconciler.json'), 'utf8'));
  check(json.length === 1 && util.isDeepStrictEqual(JSON.parse(json[0]), expected), 'the dashboard ConfigMap is not dashboards/mesh-reconciler.json');
  console.log(`official monitoring ok: ${docName(dashboards[0])} is the chart's dashboard`);
}

// The official chart's extension points, as rendered with the values chart_test.sh gives:
// imagePullSecrets, a ServiceAccount, extra containers, volumes and environment, and a merge
// point for nats.conf.
function checkExtras(docs) {
  const { sts, pod, byName } = statefulSet(docs);
  check(util.isDeepStrictEqual(pod.imagePullSecrets, [{ name: 'registry-credentials' }]), 'imagePullSecrets not rendered');
  const account = findOne(docs, 'ServiceAccount', 'mesh-sa');
  check(pod.serviceAccountName === account.metadata.name, 'the pod does not use the chart\'s ServiceAccount');
  check(pod.automountServiceAccountToken === false && account.automountServiceAccountToken === false, 'a service account token is mounted');
  check(account.metadata.annotations?.['example.com/role'] === 'mesh', 'ServiceAccount annotations not rendered');
  check(byName['log-shipper'] && !byName['log-shipper'].init, 'extra container log-shipper not rendered');
  check((pod.volumes ?? []).some((v) => v.name === 'shipper-config' && v.configMap?.name === 'shipper'), 'extra volume not rendered');
  check((byName.nats.volumeMounts ?? []).some((m) => m.name === 'shipper-config' && m.mountPath === '/etc/shipper'), 'nats.extraVolumeMounts not rendered');
  check(envValue(byName.nats, 'NATS_EXTRA') === 'x', 'nats.extraEnv not rendered');
  check(envValue(byName['mesh-reconciler'], 'EXTRA_SIDECAR') === 'y', 'reconciler.extraEnv not rendered');
  const { conf } = natsConfig(docs, pod, byName.nats);
  check(/^\s*websocket\s*{\s*port:\s*8080/m.test(conf), 'nats.extraConfig not merged into nats.conf');
  check(conf.indexOf('websocket') < conf.indexOf('include '), 'nats.extraConfig comes after the users file include');
  // The official chart's extension points (issue 36).
  check((byName.nats.ports ?? []).some((p) => p.name === 'websocket' && p.containerPort === 8080), 'nats.extraPorts not rendered');
  const client = findOne(docs, 'Service', sts.metadata.name);
  check(client.spec.type === 'LoadBalancer', `service.type ${client.spec.type}`);
  check(client.metadata.annotations?.['example.com/load-balancer'] === 'internal', 'service.annotations not rendered');
  check(client.metadata.labels?.exposure === 'internal', 'service.labels not rendered');
  check(client.spec.ports.some((p) => p.name === 'websocket' && p.port === 8080 && p.targetPort === 'websocket'), 'service.extraPorts not rendered');
  check(client.spec.ports.some((p) => p.name === 'client'), 'the client port is gone from the Service');
  const selector = sts.spec.selector.matchLabels;
  check(pod.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution, 'affinity.nodeAffinity not rendered');
  check(pod.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution, 'podAntiAffinity soft is lost beside affinity');
  const spread = pod.topologySpreadConstraints ?? [];
  check(spread.length === 1 && spread[0].topologyKey === 'topology.kubernetes.io/zone', 'topologySpreadConstraints not rendered');
  check(util.isDeepStrictEqual(spread[0].labelSelector, { matchLabels: selector }), 'a spread constraint without labelSelector does not get the pod labels');
  check(pod.nodeSelector?.disk === 'ssd', 'nodeSelector not rendered');
  check(pod.tolerations?.[0]?.key === 'dedicated' && pod.tolerations[0].effect === 'NoSchedule', 'tolerations not rendered');
  check(pod.priorityClassName === 'mesh-critical', 'priorityClassName not rendered');
  const podMeta = sts.spec.template.metadata;
  check(podMeta.labels?.team === 'mesh', 'podLabels not rendered');
  check(Object.entries(selector).every(([k, v]) => podMeta.labels[k] === v), 'the pod lost its selector labels');
  check(podMeta.annotations?.['example.com/kept'] === 'yes', 'podAnnotations not rendered');
  check(podMeta.annotations?.['checksum/config'], 'the config checksum annotation is lost');
  // The patches: each container's, then the pod's.
  check(envValue(byName.nats, 'GOMEMLIMIT') === '900MiB', 'nats.patch (add /env/-) not applied');
  check(byName.nats.resources?.limits?.memory === '2Gi', 'nats.patch (replace) not applied');
  check(byName['mesh-reconciler'].env[0].name === 'PATCHED_SIDECAR', 'reconciler.patch (add /env/0) not applied');
  check(envValue(byName['mesh-reconciler'], 'MESH_RECONCILER_RECORDS'), 'reconciler.patch lost the sidecar\'s environment');
  check(envValue(byName['render-users'], 'PATCHED_INIT') === '1', 'reconciler.initContainerPatch not applied');
  check(envValue(byName['render-users'], 'PATCHED_SIDECAR') === undefined, 'reconciler.patch reached the init container');
  check(podMeta.annotations?.['example.com/patched'] === 'yes', 'podTemplate.patch (add, ~1) not applied');
  check(!('example.com/removed' in podMeta.annotations), 'podTemplate.patch (remove) not applied');
  check(pod.terminationGracePeriodSeconds === 90, 'podTemplate.patch (replace) not applied');
  check(pod.dnsConfig?.options?.[0]?.name === 'ndots', 'podTemplate.patch (add object) not applied');
  checkHelmTest(docs, sts);
  console.log(`extension points ok: ${docName(sts)} pull secrets, ServiceAccount, extra container, volume, env, nats.conf merge; ` +
              'extra container and Service ports, Service type/labels/annotations, affinity, spread, node selector, ' +
              'tolerations, priority class, pod labels/annotations, container and pod patches, helm test');
}

// The `helm test` Pod: mesh-reconciler plan against the client Service with the records and
// the reconciler's password, from the same Secrets as the StatefulSet's pods.
function checkHelmTest(docs, sts) {
  const tests = docs.filter((d) => d.kind === 'Pod' && d.metadata.annotations?.['helm.sh/hook'] === 'test');
  check(tests.length === 1, `${tests.length} helm test Pods, expected 1`);
  const [test] = tests;
  const [c] = test.spec.containers;
  check(util.isDeepStrictEqual([...c.command, ...(c.args ?? [])], ['mesh-reconciler', 'plan']), 'the helm test does not run mesh-reconciler plan');
  check(test.spec.restartPolicy === 'Never', 'the helm test Pod restarts');
  const bus = envValue(c, 'MESH_RECONCILER_BUS');
  const ns = sts.metadata.namespace;
  check(new RegExp(`^(nats|tls)://${sts.metadata.name}\\.${ns}\\.svc\\.[a-z.]+:\\d+$`).test(bus), `the helm test's bus ${bus} is not the client Service`);
  const sidecar = allContainers(sts.spec.template.spec).find((x) => x.name === 'mesh-reconciler');
  for (const name of ['MESH_RECONCILER_RECORDS', 'MESH_RECONCILER_USER', 'MESH_RECONCILER_PASSWORD_FILE', 'MESH_RECONCILER_PRUNE']) {
    check(envValue(c, name) === envValue(sidecar, name), `the helm test's ${name} differs from the sidecar's`);
  }
  const sources = (v) => (v ?? []).find((x) => x.name === 'mesh-secrets')?.projected?.sources.slice(0, 2);
  check(util.isDeepStrictEqual(sources(test.spec.volumes), sources(sts.spec.template.spec.volumes)),
        'the helm test reads other Secrets than the pods');
  checkSecurity(test.spec, c);
  console.log(`helm test ok: ${docName(test)} runs plan against ${bus}`);
}

// reconciler.usersFile: none: JetStream only, the operator's own authentication.
function checkJetStreamOnly(docs) {
  const { pod, byName } = statefulSet(docs);
  check(!byName['render-users'], 'an init container renders a users file although usersFile is none');
  check(!(pod.volumes ?? []).some((v) => v.name === 'users'), 'a users volume although usersFile is none');
  const sidecar = byName['mesh-reconciler'];
  check(envValue(sidecar, 'MESH_RECONCILER_USERS_FILE') === undefined, 'the sidecar manages a users file');
  const { conf } = natsConfig(docs, pod, byName.nats);
  check(natsIncludes(conf).length === 0, 'nats.conf includes a users file');
  check(/^\s*accounts\s*{/m.test(conf), 'the operator\'s own accounts (nats.extraConfig) are not in nats.conf');
  console.log('JetStream only ok: no users file, no init container; the operator\'s accounts in nats.conf');
}

function checkConfined(manifests, values) {
  check(values.length > 0, 'confined: no value given');
  const secretBytes = manifests
    .filter(({ doc }) => doc.kind === 'Secret')
    .flatMap(({ doc }) => objectKeys(doc).map((key) => objectData(doc, key).toString()));
  for (const value of values) {
    const encoded = Buffer.from(value).toString('base64');
    for (const { doc, text } of manifests) {
      if (doc.kind === 'Secret') continue;
      check(!text.includes(value) && !text.includes(encoded), `a secret value appears in ${docName(doc)}`);
    }
    check(secretBytes.some((bytes) => bytes.includes(value)), 'a secret value is in no Secret either: the test did not render with it');
  }
  console.log(`confined ok: ${values.length} secret values appear in Secrets only`);
}

await main(async ([file, name, ...args]) => {
  check(file && name, 'usage: assert.mjs RENDERED.yaml CHECK [ARG...]');
  const manifests = readManifests(file);
  const docs = manifests.map((m) => m.doc);
  switch (name) {
    case 'pod': return checkPod(docs);
    case 'cluster': return checkCluster(docs, Number(args[0]), args[1] === 'open');
    case 'monitoring': return checkMonitoring(docs, args[0], args[1]);
    case 'confined': return checkConfined(manifests, args);
    case 'official-monitoring': return checkOfficialMonitoring(docs, args[0]);
    case 'helm-test': return checkHelmTest(docs, statefulSet(docs).sts);
    case 'extras': return checkExtras(docs);
    case 'jetstream-only': return checkJetStreamOnly(docs);
    default: check(false, `unknown check ${name}`);
  }
});

