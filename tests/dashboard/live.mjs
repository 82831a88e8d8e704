// Evaluates every query of the Grafana dashboard against a real Prometheus, as Grafana would
// send it: the bus variable set to the bus, the pod variable to All (".*"), $__rate_interval
// to 20s (four of the test's 1 s scrapes and more). Started by tests/scripts/dashboard_live_test.sh,
// which runs three daemons with the lease on one bus, one stream of "unexpected" drift that
// every daemon reports, and Prometheus scraping them.
//   node tests/dashboard/live.mjs DASHBOARD PROMETHEUS_URL BUS POD...
import fs from 'node:fs';
import { check, main } from '../charts/lib.mjs';

const [file, prometheus, bus, ...pods] = process.argv.slice(2);
check(file && prometheus && bus && pods.length > 0, 'usage: live.mjs DASHBOARD PROMETHEUS_URL BUS POD...');
const dashboard = JSON.parse(fs.readFileSync(file, 'utf8'));

// Panels that may rightly return nothing here, and why.
const kMayBeEmpty = { 'Bus certificate expires in': 'the test bus has no TLS' };

async function api(path, params) {
  const url = `${prometheus}${path}?${new URLSearchParams(params)}`;
  const answer = await (await fetch(url)).json();
  check(answer.status === 'success', `${path} ${JSON.stringify(params)}: ${answer.errorType}: ${answer.error}`);
  return answer.data;
}
const query = (expr) => api('/api/v1/query', { query: expr });

// Grafana's label_values(METRIC{...}, LABEL), with the variables substituted.
async function labelValues(definition, vars) {
  const m = /^label_values\((.+), *(\w+)\)$/.exec(definition);
  check(m, `not a label_values query: ${definition}`);
  return api(`/api/v1/label/${m[2]}/values`, { 'match[]': substitute(m[1], vars) });
}

function substitute(expr, vars) {
  return expr.replace(/\$__rate_interval|\$__interval/g, '20s').replace(/\$(\w+)/g, (all, name) => {
    check(name in vars, `unknown variable $${name} in ${expr}`);
    return vars[name];
  });
}

const sameSet = (a, b) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

await main(async () => {
  const vars = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
  // The variables: the bus, then its pods.
  const buses = await labelValues(vars.bus.definition, {});
  check(sameSet(buses, [bus]), `the bus variable offers ${JSON.stringify(buses)}, not ["${bus}"]`);
  const podValues = await labelValues(vars.pod.definition, { bus });
  check(sameSet(podValues, pods), `the pod variable offers ${JSON.stringify(podValues)}, not ${JSON.stringify(pods)}`);
  console.log(`variables: bus ${JSON.stringify(buses)}, pod ${JSON.stringify(podValues)}`);
  const values = { bus, pod: vars.pod.allValue };

  const results = {};  // title -> [[series...] per target]
  for (const panel of dashboard.panels) {
    results[panel.title] = [];
    for (const target of panel.targets) {
      const expr = substitute(target.expr, values);
      const data = await query(expr);
      check(data.resultType === 'vector', `panel "${panel.title}": ${data.resultType}, not a vector: ${expr}`);
      results[panel.title].push(data.result);
      // Pods by name: a per-pod series carries a pod label naming one of the three.
      if (/\{\{pod\}\}/.test(target.legendFormat)) {
        for (const s of data.result) {
          check(pods.includes(s.metric.pod), `panel "${panel.title}": a series without a pod name: ${JSON.stringify(s.metric)}`);
        }
      }
      check(!/\{\{instance\}\}/.test(target.legendFormat), `panel "${panel.title}": legend by instance`);
      if (!(panel.title in kMayBeEmpty)) {
        check(data.result.length > 0, `panel "${panel.title}": no data for ${expr}`);
      }
    }
    const n = results[panel.title].reduce((a, r) => a + r.length, 0);
    console.log(`ok - ${panel.title}: ${n} series`);
  }

  const value = (s) => Number(s.value[1]);
  const only = (title) => {
    const r = results[title];
    check(r && r.length === 1 && r[0].length === 1, `panel "${title}": not one series: ${JSON.stringify(r)}`);
    return value(r[0][0]);
  };
  // Drift counted once for the bus, where every daemon reports it.
  const naive = await query(`sum(mesh_reconciler_drift_objects{job="mesh-reconciler", bus="${bus}", kind="stream", state="unexpected"})`);
  check(value(naive.result[0]) === pods.length, `the daemons do not all report the drift: ${JSON.stringify(naive.result)}`);
  check(only('Drift on the bus') === 1, `"Drift on the bus" is ${only('Drift on the bus')}, not 1`);
  const byState = results['Drift on the bus by kind and state'][0];
  const unexpected = byState.filter((s) => s.metric.kind === 'stream' && s.metric.state === 'unexpected');
  check(unexpected.length === 1 && value(unexpected[0]) === 1,
        `"Drift on the bus by kind and state" counts stream unexpected ${JSON.stringify(unexpected)}, not once`);
  check(byState.every((s) => s.metric.kind !== 'users_file'), 'the users file is counted with the bus');
  console.log(`drift counted once: ${pods.length} daemons report 1 unexpected stream, the bus panels say 1`);
  check(only('Lease holders') === 1, `"Lease holders" is ${only('Lease holders')}, not 1`);
  const perPod = results['Lease holder'][0];
  check(sameSet(perPod.map((s) => s.metric.pod), pods) && perPod.filter((s) => value(s) === 1).length === 1,
        `"Lease holder" per pod: ${JSON.stringify(perPod)}`);
  for (const title of ['Pods held', 'Pods not connected', 'Pods with invalid records', 'Unhealthy or unrecoverable']) {
    check(only(title) === 0, `"${title}" is ${only(title)}, not 0`);
  }
  console.log(`one lease holder of ${pods.length}, named by pod; nothing held, disconnected or invalid`);

  // One pod chosen: the per-pod panels show that pod alone; the bus panels do not change.
  const one = { bus, pod: pods[1] };
  for (const panel of dashboard.panels) {
    for (const target of panel.targets) {
      const data = await query(substitute(target.expr, one));
      if (/\{\{pod\}\}/.test(target.legendFormat)) {
        check(data.result.every((s) => s.metric.pod === pods[1]),
              `panel "${panel.title}" with pod ${pods[1]}: ${JSON.stringify(data.result.map((s) => s.metric))}`);
      }
    }
  }
  const busDrift = await query(substitute(dashboard.panels.find((p) => p.title === 'Drift on the bus').targets[0].expr, one));
  check(value(busDrift.result[0]) === 1, 'the drift on the bus changed with the pod chosen');
  console.log(`pod ${pods[1]} chosen: the per-pod panels show it alone, the bus's drift is still 1`);
});
