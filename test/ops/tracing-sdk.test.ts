// C58: the tracing settings (the standard OTEL_ variables) and where spans go
// (src/ops/tracing-sdk.ts), and that tracing off costs nothing: OpenTelemetry is imported by
// tracing-sdk.ts alone, loaded only when tracing is on. Traces of the running gateway:
// test/ops/tracing.test.ts.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { tracesUrl } from '../../src/ops/tracing-sdk.ts';

const ROOT = path.join(import.meta.dirname, '../..');

describe('tracing off costs nothing', () => {
  test('only src/ops/tracing-sdk.ts imports OpenTelemetry, and only tracing.ts loads it, with a dynamic import when tracing is on', () => {
    const files = (readdirSync(path.join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    const importers = files.filter((f) => /from '@opentelemetry\//.test(readFileSync(path.join(ROOT, 'src', f), 'utf8')));
    assert.deepEqual(importers, [path.join('ops', 'tracing-sdk.ts')]);
    const loaders = files.filter((f) => readFileSync(path.join(ROOT, 'src', f), 'utf8').includes("tracing-sdk.ts'"));
    assert.deepEqual(loaders, [path.join('ops', 'tracing.ts')]);
    assert.match(readFileSync(path.join(ROOT, 'src/ops/tracing.ts'), 'utf8'), /if \(!tracingEnabled\(config\)\) return undefined;\n\s+const sdk = await import\('\.\/tracing-sdk\.ts'\);/);
  });
});

describe('tracing settings', () => {
  test('the standard OTEL_ variables set them; a sampler or ratio out of range stops the start naming the variable', () => {
    const c = loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SERVICE_NAME: 'edge', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25', OTEL_BSP_SCHEDULE_DELAY: '1000' } });
    assert.deepEqual(c.tracing, { endpoint: 'http://collector:4318', tracesEndpoint: null, serviceName: 'edge', sampler: 'parentbased_traceidratio', samplerArg: 0.25, batchDelayMs: 1000 });
    assert.equal(loadConfig({ env: {} }).tracing.endpoint, null, 'off by default');
    assert.throws(() => loadConfig({ env: { OTEL_TRACES_SAMPLER: 'sometimes' } }), /OTEL_TRACES_SAMPLER: tracing\.sampler = "sometimes": must be one of/);
    assert.throws(() => loadConfig({ env: { OTEL_TRACES_SAMPLER_ARG: '1.5' } }), /OTEL_TRACES_SAMPLER_ARG: tracing\.samplerArg/);
    assert.throws(() => loadConfig({ env: { OTEL_TRACES_SAMPLER_ARG: 'half' } }), /OTEL_TRACES_SAMPLER_ARG: tracing\.samplerArg = "half"/);
    assert.throws(() => loadConfig({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' } }), /OTEL_EXPORTER_OTLP_ENDPOINT: tracing\.endpoint/);
  });

  test('spans go to <endpoint>/v1/traces, or to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given', () => {
    assert.equal(tracesUrl({ endpoint: 'http://collector:4318/', tracesEndpoint: null }), 'http://collector:4318/v1/traces');
    assert.equal(tracesUrl({ endpoint: 'http://collector:4318', tracesEndpoint: 'http://tempo:4318/custom' }), 'http://tempo:4318/custom');
  });
});
