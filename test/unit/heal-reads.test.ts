// The reads healing's evidence comes from (src/observe/heal-reads.ts), against the scripted gateway:
// what each answer becomes, bounded lists, and a failure kept as that evidence's failure. The same
// reads as the shipped ServiceAccount against the real API server: test/e2e/node-heal.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { emptyNeeds } from '../../src/judge/heal.ts';
import { notePulled, readHealEvidence, RUNNING_PAGE, RUNNING_PAGES } from '../../src/observe/heal-reads.ts';
import { apiError, scriptedGateway } from '../support/scripted-gateway.ts';

const running = (name: string, image: string, startedAt: string, over: { imageID?: string; statusImage?: string } = {}): V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: 'main', image }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'main',
        image: over.statusImage ?? image,
        imageID: over.imageID ?? 'registry.example/app@sha256:abc',
        ready: true,
        restartCount: 0,
        state: { running: { startedAt: new Date(startedAt) } },
      },
    ],
  },
});

describe('heal reads', () => {
  it('nothing needed: no request at all', async () => {
    const { gateway, calls } = scriptedGateway();
    const reads = await readHealEvidence(gateway, emptyNeeds(), 4);
    assert.equal(calls.length, 0);
    assert.deepEqual([reads.serviceAccounts.size, reads.secrets.size, reads.pulled.size], [0, 0, 0]);
  });

  it('a ServiceAccount: its pull secrets; gone: none; refused: the failure', async () => {
    const needs = emptyNeeds();
    for (const k of ['ns/default', 'ns/gone', 'ns/secret']) needs.serviceAccounts.add(k);
    const { gateway } = scriptedGateway(
      {
        readServiceAccount: [
          (_ns: string, name: string) =>
            name === 'default'
              ? { metadata: { name }, imagePullSecrets: [{ name: 'regcred' }, { name: '' }] }
              : name === 'gone'
                ? apiError(404, 'NotFound', 'not found')
                : apiError(403, 'Forbidden', 'cannot get serviceaccounts'),
        ],
      },
      { repeatLast: true },
    );
    const reads = await readHealEvidence(gateway, needs, 1);
    assert.deepEqual(reads.serviceAccounts.get('ns/default'), { pullSecrets: ['regcred'] });
    assert.deepEqual(reads.serviceAccounts.get('ns/gone'), { pullSecrets: undefined });
    assert.deepEqual(reads.serviceAccounts.get('ns/secret'), { error: 'Forbidden: cannot get serviceaccounts' });
  });

  it('a Secret: created, and changed at the latest managedFields time; missing: does not exist', async () => {
    const needs = emptyNeeds();
    needs.secrets.add('ns/regcred');
    needs.secrets.add('ns/none');
    const { gateway, calls } = scriptedGateway(
      {
        readSecretMetadata: [
          (_ns: string, name: string) =>
            name === 'regcred'
              ? {
                  name,
                  creationTimestamp: '2026-11-29T10:00:00Z',
                  managedFields: [{ time: '2026-11-29T10:00:00Z' }, { time: '2026-11-29T11:30:00Z' }, { manager: 'x' }],
                }
              : apiError(404, 'NotFound', 'not found'),
        ],
      },
      { repeatLast: true },
    );
    const reads = await readHealEvidence(gateway, needs, 2);
    assert.deepEqual(reads.secrets.get('ns/regcred'), {
      exists: true,
      created: new Date('2026-11-29T10:00:00Z'),
      changed: new Date('2026-11-29T11:30:00Z'),
    });
    assert.deepEqual(reads.secrets.get('ns/none'), { exists: false });
    assert.deepEqual(
      calls.map((c) => c.method),
      ['readSecretMetadata', 'readSecretMetadata'],
    );
  });

  it('Running pods: the latest start per reference, under the spec and the runtime reference; bounded pages', async () => {
    const needs = emptyNeeds();
    needs.pulledIn.add('ns');
    const page = (items: V1Pod[], continueToken?: string) => ({ items, continueToken });
    const { gateway, calls } = scriptedGateway(
      {
        listPods: [
          page([running('a', 'app:1', '2026-11-29T11:00:00Z', { statusImage: 'docker.io/library/app:1' })], 'next'),
          page([running('b', 'app:1', '2026-11-29T11:30:00Z'), running('c', 'app:2', '2026-11-29T11:40:00Z', { imageID: '' })], 'more'),
        ],
      },
      { repeatLast: true },
    );
    const reads = await readHealEvidence(gateway, needs, 1);
    const pulled = reads.pulled.get('ns');
    assert.ok(pulled && !('error' in pulled));
    assert.equal(pulled.partial, true);
    assert.deepEqual(pulled.byImage.get('app:1'), { pod: 'b', startedAt: new Date('2026-11-29T11:30:00Z') });
    assert.deepEqual(pulled.byImage.get('docker.io/library/app:1'), { pod: 'a', startedAt: new Date('2026-11-29T11:00:00Z') });
    assert.equal(pulled.byImage.get('app:2'), undefined, 'no imageID: not pulled');
    assert.equal(calls.length, RUNNING_PAGES);
    assert.deepEqual(calls[0]!.args[0], { namespace: 'ns', fieldSelector: 'status.phase=Running', limit: RUNNING_PAGE });
    assert.equal((calls[1]!.args[0] as { continueToken?: string }).continueToken, 'next');
  });

  it('Running pods that could not be listed: the failure', async () => {
    const needs = emptyNeeds();
    needs.pulledIn.add('ns');
    const { gateway } = scriptedGateway({ listPods: [apiError(403, 'Forbidden', 'no')] });
    const reads = await readHealEvidence(gateway, needs, 1);
    assert.deepEqual(reads.pulled.get('ns'), { error: 'Forbidden: no' });
  });

  it('an init container that ran to completion counts; one without a start time does not', () => {
    const byImage = new Map<string, { pod: string; startedAt: Date }>();
    notePulled(
      {
        metadata: { name: 'p' },
        spec: { initContainers: [{ name: 'init', image: 'tool:1' }], containers: [{ name: 'main', image: 'app:1' }] },
        status: {
          initContainerStatuses: [
            {
              name: 'init',
              image: 'tool:1',
              imageID: 'sha',
              ready: false,
              restartCount: 0,
              state: { terminated: { exitCode: 0, startedAt: new Date('2026-11-29T11:00:00Z') } },
            },
          ],
          containerStatuses: [{ name: 'main', image: 'app:1', imageID: 'sha', ready: false, restartCount: 0, state: { waiting: {} } }],
        },
      },
      byImage,
    );
    assert.deepEqual([...byImage.keys()], ['tool:1']);
  });
});
