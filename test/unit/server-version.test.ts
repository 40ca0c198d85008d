// The floor check on the API server's /version answer. The answers of the real v1.34.4 and
// v1.37.2 servers are checked in test/e2e/kubernetes-versions.test.ts; older servers are not
// built here, so their answers are written out below in the shape /version has.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseServerVersion, serverVersionWarning } from '../../src/kube/server-version.ts';

describe('serverVersionWarning', () => {
  it('is silent from 1.34 on, managed-cluster suffixes included', () => {
    for (const v of [
      { major: '1', minor: '34', gitVersion: 'v1.34.4' },
      { major: '1', minor: '34+', gitVersion: 'v1.34.4-eks-1234567' },
      { major: '1', minor: '37', gitVersion: 'v1.37.2' },
      { major: '2', minor: '0', gitVersion: 'v2.0.0' },
    ]) {
      assert.equal(serverVersionWarning(v), undefined, JSON.stringify(v));
    }
  });

  it('warns below 1.34, naming the version and the oldest tested minor', () => {
    const w = serverVersionWarning({ major: '1', minor: '33+', gitVersion: 'v1.33.5-gke.100' });
    assert.match(w ?? '', /Kubernetes v1\.33\.5-gke\.100, older than 1\.34, the oldest minor the sweeper is tested on/);
    assert.match(w ?? '', /docs\/kubernetes-versions\.md/);
    assert.ok(serverVersionWarning({ major: '1', minor: '29', gitVersion: 'v1.29.0' }));
  });

  it('falls back to gitVersion when major/minor are empty, and warns when nothing tells the version', () => {
    assert.deepEqual(parseServerVersion({ major: '', minor: '', gitVersion: 'v1.34.1' }), { major: 1, minor: 34 });
    assert.equal(serverVersionWarning({ major: '', minor: '', gitVersion: 'v1.35.0' }), undefined);
    assert.match(serverVersionWarning({ major: '', minor: '', gitVersion: 'v1.31.0' }) ?? '', /older than 1\.34/);
    assert.match(serverVersionWarning({}) ?? '', /cannot tell the Kubernetes version/);
  });
});
