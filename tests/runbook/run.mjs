// Runs docs/runbook.md: every command the runbook gives on-call, as extracted from the document
// (extract.mjs), so that the document and this test cannot drift apart. Started by
// tests/scripts/runbook_test.sh, which owns the private bus and daemon this runs against
// (scripts/private-bus.sh) and passes their addresses in RUNBOOK_* variables.
//
// For each "## " section, in the document's order: the situation of its alert is first made
// real on the bus (a refused repair, a stream that must be recreated, a stream store damaged on
// disk, a stopped server, invalid records, a hand-edited users file, a hold), then its commands run through bash with the
// runbook's own "Before you start" block first and tests/runbook/bin first on PATH (kubectl and
// curl stand-ins mapping the pod onto the test's processes), and each must end with the exit
// code and print what the table below says: a grep must find the lines the runbook promises,
// and not the lines it must not find.
//
// Every command of the document needs an entry here, and every entry a command: a command
// added to the runbook fails this test until it is given what it must do. Commands that manage
// Kubernetes objects (get, describe, rollout, helm, secrets, cert-manager) cannot run without a
// cluster; their entries say `k8s` and why, and the test prints them as not run. A section whose
// situation the server cannot produce (a damaged store is only reported from 2.10 on) says why
// in `skip`, and its commands are printed as not run against that server.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { check, main, repoRoot } from '../charts/lib.mjs';
import { extractCommands, splitStatements } from './extract.mjs';

const env = (name) => {
  const value = process.env[name];
  check(value, `${name} is not set (run tests/scripts/runbook_test.sh)`);
  return value;
};
const dir = env('RUNBOOK_DIR');
const bin = env('MESH_BINARY');
const request = path.join(path.dirname(bin), 'mesh-nats-request');
const bus = env('RUNBOOK_BUS');
const natsServer = env('RUNBOOK_NATS_SERVER');
const passwordFile = path.join(dir, 'reconciler.password');
const settings = ['--records', path.join(dir, 'records.json'), '--bus', bus, '--password-file', passwordFile,
                  '--users-file', path.join(dir, 'users.conf'), '--pid-file', path.join(dir, 'nats.pid'),
                  '--monitor', env('RUNBOOK_MONITOR'), '--log-level', 'error'];
const remote = ['--remote', `http://${env('RUNBOOK_LISTEN')}`, '--token-file', path.join(dir, 'admin.token')];
const daemonLog = path.join(dir, 'daemon.log');

// ---- the harness: what makes each alert's situation real, and waits on conditions ----

function sleepMs(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// Polls `condition` every 100 ms until it holds, at most `seconds`; throws with `what` if not.
function waitFor(what, seconds, condition) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    if (condition()) return;
    check(Date.now() < deadline, `timed out after ${seconds} s waiting for ${what}`);
    sleepMs(100);
  }
}

function run(file, args, input) {
  try {
    return { code: 0, out: execFileSync(file, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] }) };
  } catch (error) {
    return { code: error.status ?? -1, out: `${error.stdout ?? ''}${error.stderr ?? ''}` };
  }
}

const rx = (...args) => run(bin, [...args, ...settings]);
const api = (subject, payload) => run(request, ['--bus', bus, '--password-file', passwordFile, subject,
                                                ...(payload === undefined ? [] : [payload])]);
const planCode = () => rx('plan').code;
const converged = () => planCode() === 0;
const logLines = () => (fs.existsSync(daemonLog) ? fs.readFileSync(daemonLog, 'utf8') : '');
// A log line after the first `skip` characters that matches `re`.
const loggedSince = (skip, re) => re.test(logLines().slice(skip));

function hold(reason) {
  check(run(bin, ['hold', ...remote, '--for', '3h', '--reason', reason]).code === 0, 'hold failed');
}
function release() {
  check(run(bin, ['release', ...remote, '--reason', 'runbook test']).code === 0, 'release failed');
}

// A change outside the mesh (a foreign stream deleted) wakes no pass: the harness forces one
// while the bus has not converged, as on-call would.
function waitConverged() {
  waitFor('the daemon to converge the bus', 60, () => {
    if (converged()) return true;
    run(bin, ['reconcile', ...remote]);
    return false;
  });
}

// nats-server, restarted by the harness after it stopped it; stopped again at the end.
let restartedServer = null;
const started = [];

// Gone, or a zombie: the first server is the test script's child, which bash reaps only once
// node, its foreground command, has ended.
function exited(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').startsWith('Z');
  } catch {
    return true;
  }
}

function stopServer() {
  const pid = Number(fs.readFileSync(path.join(dir, 'nats.pid'), 'utf8').trim());
  process.kill(pid, 'SIGTERM');
  waitFor('nats-server to stop', 20, () => exited(pid));
}

// `health`: the /healthz the server must answer ok; a server holding a store it could not
// load answers the full one with an error, and only ?js-enabled-only=true ok.
function startServer(health = '/healthz') {
  const out = fs.openSync(path.join(dir, 'nats.restart.out'), 'a');
  restartedServer = spawn(natsServer, ['-c', path.join(dir, 'nats.conf')], { stdio: ['ignore', out, out] });
  started.push(restartedServer);
  waitFor(`nats-server to answer ${health}`, 20, () =>
    run('/usr/bin/curl', ['-fsS', `${env('RUNBOOK_MONITOR')}${health}`]).code === 0);
}

// The server's version, [major, minor] ("nats-server: v2.10.27").
const serverVersion = (() => {
  const m = /v(\d+)\.(\d+)/.exec(run(natsServer, ['--version']).out);
  check(m, `cannot read the version of ${natsServer}`);
  return [Number(m[1]), Number(m[2])];
})();
const atLeast = (major, minor) => serverVersion[0] > major || (serverVersion[0] === major && serverVersion[1] >= minor);

// DECL's store damaged on disk (its meta.inf overwritten, as docs/faults.md's row): the server
// does not load it at its restart, and from 2.10 on its /healthz names it. The daemon reports it
// unrecoverable and neither creates over it nor deletes it.
const storeOf = (stream) => path.join(dir, 'jetstream', 'jetstream', 'MESH', 'streams', stream);
function damageDecl() {
  const meta = path.join(storeOf('DECL'), 'meta.inf');
  check(fs.existsSync(meta), `no ${meta}`);
  const skip = logLines().length;
  stopServer();
  fs.writeFileSync(meta, 'damaged\n');
  startServer('/healthz?js-enabled-only=true');
  waitFor('the daemon to reconnect', 30, () => loggedSince(skip, /msg="(re)?connected to the bus"/));
  waitFor('DECL reported unrecoverable', 30, () => {
    const plan = rx('plan');
    return plan.code === 2 && /stream +DECL +unrecoverable +report_only/.test(plan.out);
  });
}
const kNeeds210 = 'nats-server 2.9 cannot tell a damaged store from a missing stream (its /healthz checks no store): ' +
                  'the situation cannot be made real';

const records = path.join(dir, 'records.json');
const goodRecords = fs.readFileSync(records, 'utf8');

// ---- what each command must do, by section ----
//   code: its exit code; out: regexps its output must match; notOut: must not match;
//   k8s: why it is not run here. before: the harness step that precedes it (for a block,
//   only on its first statement: a block runs as one script).
const kRecreate = 'Kubernetes: restarts the pods (here: scripts/private-bus.sh starts the processes)';
const kCluster = 'Kubernetes: needs a cluster';
const kHelm = 'Helm: changes a release';
const kCertManager = 'cert-manager: needs a cluster with it';

const sections = {
  'Before you start': {
    commands: {
      'NS=mesh                                   # the release\'s namespace': { code: 0 },
      'POD=mesh-mesh-reconciler-0                # the pod named in the alert (label "pod" or "instance")': { code: 0 },
      'STREAM=DECL                               # a stream you look at or act on (rx plan\'s NAME)': { code: 0 },
      'CONSUMER=decl_node-a                      # a durable consumer on it': { code: 0 },
      'rx() { kubectl -n "$NS" exec "$POD" -c mesh-reconciler -- mesh-reconciler "$@"; }': { code: 0 },
      'rx plan': { code: 0, out: [/converged/] },
      // Named in the prose before the block: a bare hold (30m, no reason) and its release.
      'rx hold': { code: 0, out: [/^held the bus until .*: every reconciler observes only/m] },
      'rx release': { code: 0, out: [/released: passes repair again/] },
      // The lease is on (as in the chart with replicas): a hold for the whole bus.
      'rx hold --for 30m --reason "$USER: restoring DECL from backup (INC-1234)"': {
        code: 0, out: [/^held the bus until .*: every reconciler observes only/m] },
      // Exit 0 converged (2 drift); held here, for the bus, until released below.
      'rx status': {
        code: 0,
        out: [/^held: +(no|yes, bus hold until \S+, by 127\.0\.0\.1:\d+, reason "oncall: )/m,
              /^lease: +holder/m, /^last pass: +#\d+ /m, /^drift: +none/m, /^users file: /m,
              /^server: +nats-server \d+\.\d+\.\d+/m] },
      'kubectl -n $NS port-forward $POD 9464:9464 &': { code: 0 },
      'curl -s localhost:9464/drift': { code: 0, out: [/"schema": *"mesh-reconciler\/drift\/v1"/, /"hold": *\{"held":/] },
      'rx reconcile': { code: 0, out: [/^pass \d+ \(forced/m] },
      'rx hold --for 30m --reason "$USER: why"': {
        code: 0, out: [/held the bus until/] },
      'rx release --reason "$USER: done"': {
        code: 0, out: [/released: passes repair again/] },
      'rx show-stream "$STREAM"': { code: 0, out: [/^stream DECL: the mesh's/m, /config\.name +DECL/, /state\.messages +\d+/] },
      'rx show-consumer "$STREAM" "$CONSUMER"': { code: 0, out: [/num_pending +\d+/, /num_ack_pending +\d+/] },
      'rx delete-consumer "$STREAM" "$CONSUMER" --yes': { code: 0, out: [/deleted consumer decl_node-a on stream DECL/] },
      'rx delete-stream "$STREAM" --yes': { code: 0, out: [/deleted stream DECL/] },
      'rx validate /etc/mesh/records.json': { code: 0 },
      'kubectl -n $NS logs $POD -c mesh-reconciler': { code: 0, out: [/msg="pass finished"/] },
      'kubectl -n $NS logs $POD -c nats': { code: 0, out: [/Server is ready/] },
      "kubectl -n $NS get secret <records secret> -o jsonpath='{.data.records\\.json}' | base64 -d": { k8s: kCluster },
    },
    after: waitConverged,  // the stream and consumer deleted above are back
  },
  MeshDriftPersists: {
    // A repair the server refuses: DECL gone, and a foreign stream holding its subjects.
    setup() {
      hold('runbook test: a refused repair');
      check(rx('delete-stream', 'DECL', '--yes').code === 0, 'cannot delete DECL');
      const squat = api('$JS.API.STREAM.CREATE.SQUAT', JSON.stringify({ name: 'SQUAT', subjects: ['mesh.decl.*'] }));
      check(squat.code === 0 && !/"error"/.test(squat.out), `cannot create SQUAT: ${squat.out}`);
      const skip = logLines().length;
      release();
      waitFor('a refused create of DECL in the log', 20, () =>
        loggedSince(skip, /msg=action action=create_stream name=DECL outcome=refused/));
    },
    commands: {
      'rx plan --json': { code: 2, out: [/"schema": *"mesh-reconciler\/report\/v1"/, /"name": *"DECL"/] },
      "kubectl -n $NS logs $POD -c mesh-reconciler | grep -E 'level=(warn|error)'": {
        code: 0,
        out: [/level=warn .*msg=action action=create_stream name=DECL outcome=refused err_code=\d+ detail=/],
        notOut: [/msg="pass finished"/, /level=info/] },
      'kubectl -n $NS exec $POD -c nats -- wget -qO- 127.0.0.1:8222/jsz': { code: 0, out: [/"streams": *\d+/] },
      // The differs remedy: DECL in memory storage (cannot change in place), recreated.
      'rx hold --for 30m --reason "$USER: recreating $STREAM"': {
        code: 0, out: [/held the bus until/], before: differsDecl },
      "rx show-stream \"$STREAM\" | grep -E 'state\\.(messages|consumer_count)'   # drain it first: the deletion loses these": {
        code: 0, out: [/state\.messages +\d+/, /state\.consumer_count +\d+/] },
      'rx delete-stream "$STREAM" --yes': { code: 0, out: [/deleted stream DECL/] },
      'rx release --reason "$USER: $STREAM deleted"': {
        code: 0, out: [/released/] },
      // The release's own pass has created it again already: this one finds it converged.
      'rx reconcile   # creates it again: exit 0': {
        code: 0, out: [/converged/] },
      'rx show-consumer "$STREAM" "$CONSUMER"': { code: 0, out: [/config\.durable_name +decl_node-a/] },
      'rx delete-consumer "$STREAM" "$CONSUMER" --yes': { code: 0 },
      'helm upgrade … --set reconciler.prune=true': { k8s: kHelm },
      'kubectl -n $NS logs $POD -c nats': { code: 0 },
    },
    after() {
      waitConverged();
      // The remedy worked: DECL is back in file storage.
      check(/config\.storage +file/.test(rx('show-stream', 'DECL').out), 'DECL is not back in file storage');
    },
  },
  MeshObjectsUnhealthy: {
    // A single server cannot make a present stream unhealthy (that needs a cluster: a replica
    // not current, no leader). These commands read what the server reports, whatever the
    // reason: they run while it reports DECL's damaged store, which MeshStreamsUnrecoverable
    // then remedies.
    skip: () => (atLeast(2, 10) ? null : kNeeds210),
    setup: damageDecl,
    commands: {
      "rx plan | grep -A5 'THE SERVER REPORTS UNHEALTHY'": {
        code: 0, out: [/THE SERVER REPORTS UNHEALTHY\n +JetStream stream 'MESH > DECL' could not be recovered/] },
      "kubectl -n $NS logs $POD -c nats --since=30m | grep -E 'Healthcheck failed|not current|leader'": {
        code: 0, out: [/\[WRN\] Healthcheck failed: /] },
      "kubectl -n $NS exec $POD -c nats -- wget -qO- '127.0.0.1:8222/jsz?acc=MESH&streams=true'": {
        code: 0, out: [/"name": *"EVENTS"/], notOut: [/"name": *"DECL"/] },
      'kubectl -n $NS delete pod $POD': { k8s: kRecreate },
    },
  },
  MeshStreamsUnrecoverable: {
    skip: () => (atLeast(2, 10) ? null : kNeeds210),
    commands: {
      'rx plan                                  # stream DECL unrecoverable report_only, and the server\'s words': {
        code: 2, out: [/stream +DECL +unrecoverable +report_only +JetStream stream 'MESH > DECL' could not be recovered/] },
      "kubectl -n $NS logs $POD -c nats | grep -i -E 'metafile|could not be recovered'": {
        code: 0, out: [/Stream metafile ".*\/MESH\/streams\/DECL\/meta\.inf": checksums do not match/] },
      'kubectl -n $NS exec $POD -c nats -- ls /data/jetstream/jetstream/MESH/streams': {
        code: 0, out: [/^DECL$/m, /^EVENTS$/m] },
      'kubectl -n $NS exec $POD -c nats -- mv /data/jetstream/jetstream/MESH/streams/$STREAM /data/jetstream/$STREAM.damaged': {
        code: 0 },
      'rx reconcile   # creates it: exit 0': {
        code: 0, out: [/converged/] },
    },
    after() {
      waitConverged();
      // The remedy worked: DECL exists again, empty, and the damaged store was kept aside.
      check(/state\.messages +0/.test(rx('show-stream', 'DECL').out), 'DECL is not back, empty');
      check(fs.existsSync(path.join(dir, 'jetstream', 'DECL.damaged', 'meta.inf')), 'the damaged store was not kept');
    },
  },
  MeshReconcilePassesFailing: {
    setup() {
      const skip = logLines().length;
      stopServer();
      run(bin, ['reconcile', ...remote]);  // a forced pass, which fails
      waitFor('a failed pass in the log', 30, () => loggedSince(skip, /msg="pass failed"/));
    },
    commands: {
      'kubectl -n $NS logs $POD -c mesh-reconciler --since=20m | grep -E \'msg="pass failed"\'': {
        code: 0, out: [/level=warn pass=\d+ msg="pass failed" .*error="unavailable: /], notOut: [/msg=lease/] },
      'rx reconcile': { code: 1, out: [/error: unavailable/] },
      'kubectl -n $NS rollout restart statefulset/<release>-mesh-reconciler': { k8s: kRecreate },
    },
    // The server back: the daemon reconnects and repairs (MeshBusDisconnected reads both lines).
    after() {
      const skip = logLines().length;
      startServer();
      waitFor('the daemon to reconnect', 30, () => loggedSince(skip, /msg="(re)?connected to the bus"/));
      waitConverged();
    },
  },
  MeshReconcilerDown: {
    commands: {
      'kubectl -n $NS get pod $POD -o wide': { k8s: kCluster },
      'kubectl -n $NS describe pod $POD        # restarts, probe failures, OOMKilled': { k8s: kCluster },
      // runbook_test.sh restarted the daemon once before this ran: the first one's log.
      'kubectl -n $NS logs $POD -c mesh-reconciler --previous': { code: 0, out: [/msg=stopped/] },
      'helm upgrade': { k8s: kHelm },
    },
  },
  MeshReconcilerNotScraped: {
    commands: {
      'kubectl -n $NS get statefulset,pods -l app.kubernetes.io/name=mesh-reconciler': { k8s: kCluster },
      'helm -n $NS get values <release> | grep -A3 monitoring': { k8s: kHelm },
    },
  },
  MeshRecordsInvalid: {
    setup() {
      const skip = logLines().length;
      fs.writeFileSync(records, '{"mesh": "x", "nodes": [{"name": 7}]}\n');
      waitFor('"records invalid" in the log', 20, () => loggedSince(skip, /msg="records invalid"/));
    },
    commands: {
      'kubectl -n $NS logs $POD -c mesh-reconciler | grep -i records': {
        code: 0, out: [/level=warn pass=\d+ msg="records invalid" errors=\d+ first=".+" using_last_valid=true/] },
      'rx validate /etc/mesh/records.json': { code: 1, out: [/nodes\[0\]\.name/] },
    },
    after() {
      fs.writeFileSync(records, goodRecords);
      waitConverged();
    },
  },
  MeshBusDisconnected: {
    // The server stopped and came back in MeshReconcilePassesFailing: the log has both.
    commands: {
      'kubectl -n $NS logs $POD -c nats --tail=50': { code: 0, out: [/Server is ready/] },
      "kubectl -n $NS logs $POD -c mesh-reconciler | grep -i -E 'connect|authorization|tls'": {
        code: 0, out: [/msg="disconnected from the bus"/, /msg="(re)?connected to the bus"/] },
      'kubectl -n $NS get pod $POD             # is the nats container ready?': { k8s: kCluster },
      'helm rollback': { k8s: kHelm },
      'kubectl -n $NS delete pod $POD': { k8s: kRecreate },
      'kubectl -n $NS logs <pod> -c nats | grep -i route': { k8s: 'another member\'s pod: the test\'s bus has one server' },
    },
  },
  MeshBusCertificateExpiringSoon: {
    commands: {
      ["kubectl -n $NS get secret <tls.existingSecret> -o jsonpath='{.data.tls\\.crt}' | base64 -d \\\n" +
       '  | openssl x509 -noout -enddate -subject -ext subjectAltName']: { k8s: kCluster },
      'kubectl -n $NS get certificate': { k8s: kCertManager },
      'kubectl -n $NS describe certificate <name>': { k8s: kCertManager },
      'cmctl renew <name>': { k8s: kCertManager },
      'kubectl -n $NS rollout restart statefulset/<release>-mesh-reconciler': { k8s: kRecreate },
    },
  },
  MeshReconcilerHeldTooLong: {
    setup() {
      hold('oncall: a hold someone forgot');
    },
    commands: {
      // Held, converged: exit 0, and the first line names the forgotten hold.
      'rx status': {
        code: 0, out: [/^held: +yes, bus hold until \S+, by \S+, reason "oncall: a hold someone forgot"/m] },
      "kubectl -n $NS logs $POD -c mesh-reconciler | grep -E 'msg=\"(held|released|hold expired|bus hold)'": {
        code: 0,
        out: [/msg="held: passes observe only" scope=bus by=127\.0\.0\.1:\d+ reason="oncall: restoring DECL from backup \(INC-1234\)" for_ms=1800000 until=/,
              /msg="bus hold written: every instance observes only" scope=bus by=127\.0\.0\.1:\d+ reason="oncall: restoring DECL/,
              /msg="held: passes observe only" scope=bus by=\S+ reason="oncall: a hold someone forgot"/,
              /msg="released: passes apply again" by=\S+ reason="oncall: done"/],
        notOut: [/msg="pass/] },
      'rx release --reason "$USER: maintenance over"': {
        code: 0, out: [/released: passes repair again/] },
      'rx reconcile': { code: 0, out: [/converged/] },
      'rx hold --for 4h --reason "$USER: why"': {
        code: 0, out: [/held the bus until/] },
    },
    after: release,
  },
  MeshReconcileLoopStalled: {
    commands: {
      "kubectl -n $NS logs $POD -c mesh-reconciler --since=30m | grep -E 'msg=\"pass (finished|failed)\"' | tail -n 3": {
        code: 0, out: [/pass=\d+ msg="pass finished"/], notOut: [/msg="pass scheduled"/] },
      'kubectl -n $NS logs $POD -c mesh-reconciler --tail=20': { code: 0, out: [/pass=\d+/] },
      'kubectl -n $NS port-forward $POD 9464:9464 &   # the image has no curl or wget': { code: 0 },
      'curl -s localhost:9464/healthz': { code: 0, out: [/^ok/] },
      'kubectl -n $NS logs $POD -c nats --tail=50': { code: 0 },
      'kubectl -n $NS delete pod $POD': { k8s: kRecreate },
    },
  },
  MeshUsersFileReloadsFailing: {
    // A hand-edited users file: the daemon writes it back and reloads the server.
    setup() {
      const skip = logLines().length;
      fs.appendFileSync(path.join(dir, 'users.conf'), '# edited by hand\n');
      waitFor('the users file written back and reloaded', 20, () =>
        loggedSince(skip, /action=reload_server .*outcome=done/));
    },
    commands: {
      "kubectl -n $NS logs $POD -c mesh-reconciler --since=20m | grep -E 'write_users_file|reload'": {
        code: 0, out: [/msg=action action=write_users_file name=\S+ outcome=done/,
                       /msg=action action=reload_server name=\S+ outcome=done .*detail="reload confirmed \(SIGHUP to nats-server pid \d+\)"/] },
      "kubectl -n $NS logs $POD -c nats --since=20m | grep -i -E 'reload|error'": {
        code: 0, out: [/Reloaded server configuration/] },
      'kubectl -n $NS exec $POD -c mesh-reconciler -- df -h /etc/nats-users': { code: 0, out: [/Filesystem/] },
      'kubectl -n $NS exec $POD -c mesh-reconciler -- cat /etc/nats-users/users.conf': {
        code: 0, out: [/\$2[aby]\$\d\d\$/], notOut: [new RegExp(fs.readFileSync(passwordFile, 'utf8').trim())] },
    },
  },
  MeshReconcilerExceptions: {
    commands: {
      // No bug was hit: nothing to find (grep exits 1). The line's shape is the loop's.
      "kubectl -n $NS logs $POD -c mesh-reconciler | grep 'threw an exception'": { code: 1, notOut: [/./] },
      'rx validate /etc/mesh/records.json': { code: 0 },
    },
  },
  MeshLeaseHoldersNotOne: {
    commands: {
      ['for p in $(kubectl -n $NS get pods -l app.kubernetes.io/name=mesh-reconciler -o name); do\n' +
       '  echo "$p"; kubectl -n $NS logs "$p" -c mesh-reconciler --since=30m | grep \'msg="\\?lease\' | tail -n 3\n' +
       'done']: { code: 0, out: [/^pod\/mesh-mesh-reconciler-0$/m, /msg=lease role=holder holder=\S+$/m] },
      'kubectl -n $NS exec $POD -c mesh-reconciler -- env | grep LEASE': { code: 0, out: [/^MESH_RECONCILER_LEASE=1$/m] },
      'helm upgrade': { k8s: kHelm },
    },
  },
  MeshObjectsContested: {
    // A second writer, by hand: EVENTS' max_age set to one day, and set again right after the
    // daemon set it back.
    setup() {
      const setMaxAge = () => {
        const shown = JSON.parse(rx('show-stream', 'EVENTS', '--json').out);
        const config = { ...shown.info.config, max_age: 86400 * 1e9 };
        const updated = api('$JS.API.STREAM.UPDATE.EVENTS', JSON.stringify(config));
        check(updated.code === 0 && !/"error"/.test(updated.out), `cannot update EVENTS: ${updated.out}`);
      };
      let skip = logLines().length;
      setMaxAge();
      waitFor('the daemon to set EVENTS back', 20, () =>
        loggedSince(skip, /msg=action action=update_stream name=EVENTS outcome=done/));
      skip = logLines().length;
      setMaxAge();
      waitFor('the contest in the log', 20, () => loggedSince(skip, /msg="contested: /));
    },
    commands: {
      'kubectl -n $NS logs $POD -c mesh-reconciler --since=30m | grep contested': {
        code: 0, out: [/kind=stream object=EVENTS fields=max_age ours=\S+ found=\S+ round=1 backoff_ms=10000/] },
      "curl -s localhost:9464/drift | grep -o 'contested: [^\"]*'": {
        code: 0, out: [/contested: another writer changes it back; not updated for \d+ s/] },
    },
    after: waitConverged,  // the backoff over, a forced pass sets EVENTS back
  },
};

// DECL recreated by someone in memory storage, which the server cannot change in place:
// "differs", report only, until on-call recreates it.
function differsDecl() {
  api('$JS.API.STREAM.DELETE.SQUAT');
  waitConverged();
  hold('runbook test: DECL in memory storage');
  const shown = JSON.parse(rx('show-stream', 'DECL', '--json').out);
  const config = { ...shown.info.config, storage: 'memory' };
  check(rx('delete-stream', 'DECL', '--yes').code === 0, 'cannot delete DECL');
  const created = api('$JS.API.STREAM.CREATE.DECL', JSON.stringify(config));
  check(!/"error"/.test(created.out), `cannot create DECL in memory: ${created.out}`);
  release();
  waitFor('DECL reported as differing', 20, () => {
    const plan = rx('plan');
    return plan.code === 2 && /stream +DECL +differs +report_only/.test(plan.out);
  });
}

// ---- running ----

const prelude = [];
const results = [];

function runScript(statements) {
  const script = ['set +e', `export PATH=${path.join(repoRoot, 'tests', 'runbook', 'bin')}:$PATH`, 'USER=oncall',
                  ...prelude];
  statements.forEach((statement, i) => {
    script.push(`{\n${statement}\n} >"$RUNBOOK_OUT/${i}" 2>&1; echo $? >"$RUNBOOK_OUT/${i}.rc"`);
  });
  const out = fs.mkdtempSync(path.join(dir, 'out.'));
  execFileSync('bash', ['-c', script.join('\n')], { env: { ...process.env, RUNBOOK_OUT: out }, stdio: 'inherit' });
  return statements.map((_, i) => ({
    code: Number(fs.readFileSync(path.join(out, `${i}.rc`), 'utf8').trim()),
    out: fs.readFileSync(path.join(out, String(i)), 'utf8'),
  }));
}

function judge(section, statement, expected, got) {
  const problems = [];
  if (got.code !== expected.code) problems.push(`exit ${got.code}, expected ${expected.code}`);
  for (const re of expected.out ?? []) if (!re.test(got.out)) problems.push(`prints nothing matching ${re}`);
  for (const re of expected.notOut ?? []) if (re.test(got.out)) problems.push(`prints ${re}, which it must not`);
  results.push({ section, statement, problems, out: got.out });
}

await main(async () => {
  const markdown = fs.readFileSync(path.join(repoRoot, 'docs', 'runbook.md'), 'utf8');
  const found = extractCommands(markdown);
  // Every command has an entry, and every entry a command.
  const seen = new Set();
  const missing = [];
  for (const c of found) {
    for (const s of c.kind === 'block' ? splitStatements(c.text) : [c.text]) {
      seen.add(`${c.section}\u0000${s}`);
      if (!sections[c.section]?.commands[s]) missing.push(`[${c.section}] ${JSON.stringify(s)}`);
    }
  }
  check(missing.length === 0, `runbook commands with no entry in tests/runbook/run.mjs:\n${missing.join('\n')}`);
  const stale = [];
  for (const [name, section] of Object.entries(sections)) {
    for (const s of Object.keys(section.commands)) if (!seen.has(`${name}\u0000${s}`)) stale.push(`[${name}] ${JSON.stringify(s)}`);
  }
  check(stale.length === 0, `entries for commands the runbook no longer has:\n${stale.join('\n')}`);

  const notRun = [];
  try {
    let current = null;
    let skipped = null;  // why the current section cannot run against this server
    for (const c of found) {
      const section = sections[c.section];
      if (current !== c.section) {
        if (current && !skipped && sections[current].after) sections[current].after();
        current = c.section;
        skipped = section.skip ? section.skip() : null;
        if (!skipped && section.setup) section.setup();
      }
      const statements = c.kind === 'block' ? splitStatements(c.text) : [c.text];
      if (skipped) {
        for (const s of statements) notRun.push(`[${c.section}] ${s.split('\n')[0]}: ${skipped}`);
        continue;
      }
      const runnable = statements.filter((s) => !section.commands[s].k8s);
      for (const s of statements) if (section.commands[s].k8s) notRun.push(`[${c.section}] ${s.split('\n')[0]}: ${section.commands[s].k8s}`);
      if (runnable.length === 0) continue;
      if (section.commands[runnable[0]].before) section.commands[runnable[0]].before();
      const got = runScript(runnable);
      runnable.forEach((s, i) => judge(c.section, s, section.commands[s], got[i]));
      // The "Before you start" block defines NS, POD, STREAM, CONSUMER and rx for all the rest.
      if (c.section === 'Before you start' && prelude.length === 0) prelude.push(...statements);
    }
    if (current && !skipped && sections[current].after) sections[current].after();
  } finally {
    for (const child of started) child.kill('SIGTERM');
  }

  let failed = 0;
  for (const r of results) {
    const name = `[${r.section}] ${r.statement.split('\n')[0]}`;
    if (r.problems.length === 0) {
      console.log(`ok - ${name}`);
    } else {
      failed++;
      console.log(`not ok - ${name}\n    ${r.problems.join('\n    ')}\n    output:\n${r.out.replace(/^/gm, '      ')}`);
    }
  }
  for (const n of notRun) console.log(`not run - ${n}`);
  console.log(`runbook: ${results.length - failed} of ${results.length} commands did what the runbook says; ` +
              `${notRun.length} not run (Kubernetes management, or not possible against this server)`);
  check(failed === 0, `${failed} runbook command(s) did not do what the runbook says`);
});
