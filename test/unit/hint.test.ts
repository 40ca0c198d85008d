// The hint of each cause (judge/hint.ts), on the messages real kubelets wrote (test/fixtures/).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findStuckContainers, PULL_CLASS_RULES } from '../../src/classify/index.ts';
import { hintByCue, hintFor } from '../../src/judge/hint.ts';
import { PULL_CLASSES } from '../../src/model.ts';
import { REAL_NODES } from './real-node.ts';

/** What the hint of each recorded case says (a phrase of it), by case id. */
const EXPECTED: Readonly<Record<string, RegExp>> = {
  'repo-missing': /does not exist .*push the image first/,
  'tag-missing': /does not exist .*push the image first/,
  'auth-no-secret': /imagePullSecret of the pod or of its ServiceAccount/,
  'auth-wrong-password': /imagePullSecret of the pod or of its ServiceAccount/,
  'unresolvable-host': /cannot resolve the registry's host name/,
  'connection-refused': /cannot connect to the registry/,
  'invalid-name': /reference is not valid/,
  'never-pull': /pull policy Never and the image is not on the node/,
  'init-container': /does not exist/,
  sidecar: /does not exist/,
  'too-many-requests': /rate-limiting/,
  'too-many-requests-on-fetch': /rate-limiting/,
  'service-unavailable': /server error/,
  'token-unavailable': /server error|unavailable/,
  'untrusted-certificate': /does not trust the registry's TLS certificate/,
  'mirror-outage': /does not exist|cannot connect to the registry/,
  cancelled: /makes no progress/,
  'short-name': /write the full reference/,
  'signature-required': /signature policy/,
  'platform-mismatch': /no variant for the node's OS and architecture/,
};

describe('the hint', () => {
  for (const fixture of REAL_NODES) {
    it(`names what to do for every cause recorded on ${fixture.runtime}`, () => {
      for (const c of fixture.cases) {
        const expected = EXPECTED[c.id];
        assert.ok(expected, `${c.id}: no expected hint`);
        for (const [reason, pod] of Object.entries(c.pods)) {
          const stuck = findStuckContainers(pod).find((s) => s.container === c.container);
          assert.ok(stuck, `${c.id} ${reason}: not stuck`);
          assert.match(hintFor(stuck), expected, `${fixture.runtime} ${c.id} ${reason}: ${stuck.message}`);
        }
      }
    });
  }

  it('has one for every rule of every class, and one for a class whatever decided it', () => {
    for (const rule of PULL_CLASS_RULES) assert.ok(hintByCue(rule.pullClass, rule.cue).length > 20, rule.cue);
    for (const c of PULL_CLASSES) assert.ok(hintByCue(c, 'something new').length > 20, c);
  });

  it('is words, without the image reference: the same for any image', () => {
    const missing = {
      reason: 'ErrImagePull' as const,
      message: 'failed to resolve reference "r.example/denied-app:v1": not found',
      pullClass: 'permanent' as const,
    };
    assert.equal(hintFor({ ...missing, image: 'r.example/denied-app:v1' }), hintFor({ ...missing, image: 'r.example/other:v1' }));
    assert.match(hintFor({ ...missing, image: 'r.example/denied-app:v1' }), /does not exist/);
  });
});
