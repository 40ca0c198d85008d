// Four families of pull failures (docs/classification.md): an OCI artifact that is not a container
// image, a registry the node's configuration blocks, a schema-1 manifest refused (permanent), and
// Windows socket errors (transient). Each fixture names its source (test/unit/pull-families.ts);
// none of them may change class whatever the image is called.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainPullFailure, isNotFoundFailure, stripImageReferences } from '../../src/classify/index.ts';
import { FAMILY_FIXTURES, type FamilyFixture, type FamilyNames } from './pull-families.ts';

const ref = (n: FamilyNames): string => `${n.host}/${n.repo}${n.object}`;
const PLAIN: FamilyNames = { host: 'registry.example.com', repo: 'team/app', object: ':1' };

/** The rule each family is decided by (or, where another rule of the same class comes first, that one). */
const DECIDED_BY: Record<FamilyFixture['family'], RegExp> = {
  'oci-artifact': /^an OCI artifact that is not a container image/,
  'blocked-registry': /^a registry the node's configuration blocks/,
  'schema-1': /^image format the runtime refuses \(schema 1/,
  'windows-socket': /^Windows sockets|^dial tcp/,
};

// Names made of the words these rules (and every other rule) look for.
const HOSTS = ['registry.example.com', 'blocked.example.com:5000', 'wsarecv.artifact.io', 'localhost:5000', '10.0.0.7', 'docker.io'];
const REPOS = [
  'team/app',
  'charts/unsupported-media-type',
  'acme/blocked-registry',
  'legacy/schema-1-prettyjws',
  'win/wsarecv-connectex',
  'acme/actively-refused',
  'models/artifact',
  'library/timeout-not-found',
];
const OBJECTS = [
  ':1',
  ':blocked',
  ':artifact',
  ':schema1',
  ':forcibly-closed',
  ':connectex',
  ':rejected-by-policy',
  ':not-found',
  ':unauthorized',
  ':429',
  ':timeout',
  '@sha256:b22c7289dd3b4785a3795c90e15d16bd66bd29b444b8974fe29ed0443ce50405',
];

function* names(): Generator<FamilyNames> {
  for (const host of HOSTS) for (const repo of REPOS) for (const object of OBJECTS) yield { host, repo, object };
}

describe('four families of pull messages', () => {
  for (const f of FAMILY_FIXTURES) {
    it(`${f.family}: ${f.expected} (${f.source})`, () => {
      const got = explainPullFailure(f.reason, f.message(PLAIN), ref(PLAIN));
      assert.equal(got.pullClass, f.expected, got.decidedBy);
      if (f.reason !== 'SignatureValidationFailed') assert.match(got.decidedBy, DECIDED_BY[f.family]);
      // Refused images are not "not found": a burst of them never trips the not-found breaker.
      assert.equal(isNotFoundFailure({ reason: f.reason, message: f.message(PLAIN), image: ref(PLAIN), pullClass: got.pullClass }), false);
    });
  }

  it('every family has fixtures, the refused ones permanent and the Windows ones transient', () => {
    const classes = new Map<string, Set<string>>();
    for (const f of FAMILY_FIXTURES) classes.set(f.family, (classes.get(f.family) ?? new Set()).add(f.expected));
    assert.deepEqual(Object.fromEntries([...classes].map(([k, v]) => [k, [...v]])), {
      'oci-artifact': ['permanent'],
      'blocked-registry': ['permanent'],
      'schema-1': ['permanent'],
      'windows-socket': ['transient'],
    });
  });

  it('no name decides: every fixture keeps its class for names made of cue words, with and without the image', () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const f of FAMILY_FIXTURES) {
      for (const n of names()) {
        const message = f.message(n);
        for (const image of [ref(n), undefined]) {
          checked += 1;
          const got = explainPullFailure(f.reason, message, image);
          if (got.pullClass !== f.expected) wrong.push(`${got.pullClass} (${got.decidedBy}) for ${ref(n)}: ${message}`);
        }
      }
    }
    assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${checked} wrong`);
  });

  it('the names are gone from the text the rules read', () => {
    const n: FamilyNames = { host: 'blocked.wsarecv.io:5000', repo: 'acme/unsupported-media-type', object: ':schema-1-connectex' };
    for (const f of FAMILY_FIXTURES) {
      const text = stripImageReferences(f.message(n).replace(/^Back-off pulling image "[^"]*": \w+: /, ''), ref(n));
      assert.doesNotMatch(text, /blocked\.wsarecv|unsupported-media-type|schema-1-connectex/, f.source);
    }
  });

  it('a media type is not a cue: an artifact type made of cue words stays permanent', () => {
    for (const type of ['application/vnd.acme.timeout.v1+json', 'application/vnd.denied.unauthorized+json', 'application/x-eof-429']) {
      assert.equal(
        explainPullFailure('ErrImagePull', `Error response from daemon: unsupported media type ${type}`).pullClass,
        'permanent',
        type,
      );
      const crio = `parsing image configuration: unsupported image-specific operation on artifact with type "${type}"`;
      assert.equal(explainPullFailure('ErrImagePull', crio).pullClass, 'permanent', type);
    }
  });

  it('the words alone, outside these forms, decide nothing new', () => {
    // "blocked" or "artifact" in free text is not the runtime's refusal.
    assert.equal(explainPullFailure('ErrImagePull', 'artifact upload blocked').pullClass, 'unknown');
    assert.equal(explainPullFailure('ErrImagePull', 'the registry is blocked').pullClass, 'unknown');
  });
});
