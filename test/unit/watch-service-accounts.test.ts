import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1ServiceAccount } from '@kubernetes/client-node';
import { ServiceAccountSecrets } from '../../src/watch/service-accounts.ts';

const sa = (uid: string, name: string, secrets: string[], namespace = 'ci'): V1ServiceAccount => ({
  metadata: { uid, name, namespace },
  imagePullSecrets: secrets.map((s) => ({ name: s })),
});

function follow() {
  const given: string[] = [];
  const handler = new ServiceAccountSecrets((ns, name) => given.push(`${ns}/${name}`)).handler();
  const list = (...items: V1ServiceAccount[]) => {
    handler.listStarted();
    for (const item of items) handler.listed(item);
    handler.listEnded();
  };
  return { given, handler, list };
}

describe('the ServiceAccounts run --watch follows while its policy heals', () => {
  it('tells of a ServiceAccount that comes to list a pull secret, once', () => {
    const t = follow();
    t.list(sa('1', 'builder', []), sa('2', 'default', []));
    assert.deepEqual(t.given, []);
    t.handler.event('MODIFIED', sa('1', 'builder', ['regcred']));
    t.handler.event('MODIFIED', sa('1', 'builder', ['regcred']));
    assert.deepEqual(t.given, ['ci/builder']);
  });

  it('a secret taken away is no news; a new one beside those it lists is', () => {
    const t = follow();
    t.list(sa('1', 'builder', ['a', 'b']));
    t.given.length = 0;
    t.handler.event('MODIFIED', sa('1', 'builder', ['a']));
    assert.deepEqual(t.given, []);
    t.handler.event('MODIFIED', sa('1', 'builder', ['a', 'c']));
    assert.deepEqual(t.given, ['ci/builder']);
  });

  it('the first list tells of every ServiceAccount that lists a pull secret (a secret given before the watch began)', () => {
    const t = follow();
    t.list(sa('1', 'builder', ['regcred']), sa('2', 'default', []), sa('3', 'etl', ['x'], 'data'));
    assert.deepEqual(t.given, ['ci/builder', 'data/etl']);
  });

  it('a list after an expired watch tells only of what changed since the last one; a deleted ServiceAccount made again is new', () => {
    const t = follow();
    t.list(sa('1', 'builder', ['regcred']), sa('2', 'default', []));
    t.given.length = 0;
    t.list(sa('1', 'builder', ['regcred']), sa('2', 'default', ['late']));
    assert.deepEqual(t.given, ['ci/default']);
    t.handler.event('DELETED', sa('1', 'builder', ['regcred']));
    t.handler.event('ADDED', sa('4', 'builder', ['regcred']));
    assert.deepEqual(t.given, ['ci/default', 'ci/builder']);
  });

  it('forgets what a list no longer holds', () => {
    const t = follow();
    t.list(sa('1', 'builder', ['regcred']));
    t.list();
    t.given.length = 0;
    t.list(sa('1', 'builder', ['regcred']));
    assert.deepEqual(t.given, ['ci/builder'], 'gone from the list, then back: its secrets are news again');
  });
});
