// Validates every manifest of `helm template` outputs against the Kubernetes API schemas of
// kubernetes-models (types, enums, required fields; prometheus-operator kinds through
// @kubernetes-models/prometheus-operator). A kind without a model is an error, not a skip.
//
// Note: kubernetes-models does not refuse unknown fields; typos in the chart's *values* are
// refused by values.schema.json, and assert.mjs checks the fields the chart relies on.
//
// Usage: node tests/charts/validate.mjs RENDERED.yaml...
import { check, docName, main, readManifests, requireTool } from './lib.mjs';

function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const candidates =
    group === 'monitoring.coreos.com'
      ? [`@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`]
      : [`kubernetes-models/${group ? `${group}/` : ''}${version}/${kind}`];
  for (const id of candidates) {
    try {
      return requireTool(id)[kind];
    } catch (error) {
      if (error.code !== 'MODULE_NOT_FOUND') throw error;
    }
  }
  return undefined;
}

await main(async (files) => {
  check(files.length > 0, 'usage: validate.mjs RENDERED.yaml...');
  for (const file of files) {
    const manifests = readManifests(file);
    check(manifests.length > 0, `${file}: no manifest`);
    const kinds = [];
    for (const { doc } of manifests) {
      check(doc.apiVersion && doc.kind, `${file}: a document without apiVersion/kind`);
      check(doc.metadata?.name, `${file}: ${doc.kind} without metadata.name`);
      const Model = modelFor(doc.apiVersion, doc.kind);
      check(Model, `${file}: no model for ${doc.apiVersion} ${doc.kind}`);
      try {
        new Model(doc).validate();
      } catch (error) {
        check(false, `${file}: ${docName(doc)} is invalid: ${error.message}`);
      }
      kinds.push(docName(doc));
    }
    console.log(`validated ${manifests.length} manifests of ${file}: ${kinds.join(', ')}`);
  }
});
