#!/usr/bin/env node
// Validates rendered Kubernetes manifests (a YAML stream on stdin, from `kubectl kustomize`)
// against Kubernetes' own schemas, as bundled by the npm package kubernetes-models (and the
// Prometheus Operator's for a ServiceMonitor), then checks what docs/deploy.md promises of the
// gateway's Deployment. Prints one line per object; exits 1 on the first kind of failure found.
//   kubectl kustomize deploy/kubernetes/base | node deploy/kubernetes/validate/validate.mjs
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const input = readFileSync(0, 'utf8');
const docs = parseAllDocuments(input).map((d) => {
  if (d.errors.length) throw new Error(`YAML: ${d.errors[0].message}`);
  return d.toJS();
}).filter(Boolean);

const failures = [];
const fail = (what) => failures.push(what);

async function modelOf({ apiVersion, kind }) {
  if (apiVersion?.startsWith('monitoring.coreos.com/')) return (await import(`@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`))[kind];
  const group = apiVersion === 'v1' ? 'v1' : apiVersion;
  return (await import(`kubernetes-models/${group}/${kind}`))[kind];
}

for (const doc of docs) {
  const name = `${doc.kind}/${doc.metadata?.name}`;
  let Model;
  try {
    Model = await modelOf(doc);
  } catch {
    fail(`${name}: no schema for ${doc.apiVersion} ${doc.kind}`);
    continue;
  }
  try {
    new Model(doc).validate();
    console.log(`[kubernetes] ${name} (${doc.apiVersion}): valid`);
  } catch (err) {
    fail(`${name}: ${err.message}`);
  }
}

// What the deployment promises (C3, C47; docs/deploy.md).
const byKind = (kind) => docs.filter((d) => d.kind === kind);
for (const kind of ['Deployment', 'Service', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'ConfigMap', 'NetworkPolicy']) {
  if (byKind(kind).length !== 1) fail(`expected one ${kind}, found ${byKind(kind).length}`);
}
const [deployment] = byKind('Deployment');
if (deployment) {
  const pod = deployment.spec.template.spec;
  const c = pod.containers[0];
  const probe = (p) => p?.httpGet?.path;
  if (probe(c.livenessProbe) !== '/health/live') fail('liveness probe is not GET /health/live');
  if (probe(c.readinessProbe) !== '/health/ready') fail('readiness probe is not GET /health/ready');
  const pre = c.lifecycle?.preStop;
  const preStopSeconds = pre?.sleep?.seconds ?? (pre?.exec?.command?.[0] === 'sleep' ? Number(pre.exec.command[1]) : 0);
  if (!(preStopSeconds > 0)) fail('no preStop pause before SIGTERM');
  const graceMs = JSON.parse(readFileSync(path.join(ROOT, 'config/default.json'), 'utf8')).server.shutdownGraceMs;
  const termination = pod.terminationGracePeriodSeconds ?? 30;
  if (!(termination > preStopSeconds + graceMs / 1000)) {
    fail(`terminationGracePeriodSeconds ${termination} is not longer than the preStop pause (${preStopSeconds} s) + server.shutdownGraceMs (${graceMs} ms)`);
  }
  if (pod.securityContext?.runAsNonRoot !== true) fail('the pod does not require a non-root user');
  const from = c.envFrom ?? [];
  if (!from.some((e) => e.configMapRef?.name?.startsWith('junction-config'))) fail('no environment from the ConfigMap');
  if (!from.some((e) => e.secretRef?.name === 'junction-secrets')) fail('no environment from the Secret junction-secrets');
  const annotations = deployment.spec.template.metadata?.annotations ?? {};
  if (annotations['prometheus.io/scrape'] !== 'true' && byKind('ServiceMonitor').length === 0) fail('neither scrape annotations nor a ServiceMonitor');
  // A pinned image: `latest` (or no tag) runs whatever was pushed last, pod by pod.
  for (const container of pod.containers) {
    const tag = /:([^:/@]+)$/.exec(container.image)?.[1];
    if (!container.image.includes('@') && (!tag || tag === 'latest')) fail(`container ${container.name}: image ${container.image} is not pinned to a release`);
  }
  // Only the ingress is a trusted proxy: a whole private range would let any pod set X-Forwarded-For.
  const settings = byKind('ConfigMap')[0]?.data ?? {};
  for (const entry of (settings.TRUSTED_PROXIES ?? '').split(',').map((e) => e.trim()).filter(Boolean)) {
    const prefix = entry.includes('/') ? Number(entry.split('/')[1]) : entry.includes(':') ? 128 : 32;
    if (prefix < 16 || ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'].includes(entry)) fail(`TRUSTED_PROXIES trusts a whole network (${entry}): the ingress only`);
  }
  const policy = byKind('NetworkPolicy')[0];
  if (policy && !(policy.spec.policyTypes ?? []).includes('Ingress')) fail('the NetworkPolicy does not restrict ingress');
  if (policy && !(policy.spec.policyTypes ?? []).includes('Egress')) fail('the NetworkPolicy does not restrict egress');
  const hpa = byKind('HorizontalPodAutoscaler')[0];
  if (hpa && hpa.spec.scaleTargetRef.name !== deployment.metadata.name) fail('the HorizontalPodAutoscaler scales something else');
  console.log(`[kubernetes] Deployment: liveness /health/live, readiness /health/ready, preStop ${preStopSeconds} s, termination grace ${termination} s > ${preStopSeconds} s + shutdownGraceMs ${graceMs} ms`);
}

if (failures.length) {
  for (const f of failures) console.log(`[kubernetes] FAILED: ${f}`);
  process.exit(1);
}
console.log(`[kubernetes] ${docs.length} objects valid`);
