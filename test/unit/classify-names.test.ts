// No part of an image reference decides the class (SPEC "What counts as stuck"). For every message
// template a runtime prints, the class must not change whatever the registry host, repository, tag
// or digest is called, even when every one of them is made of cue words.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainPullFailure, stripImageReferences } from '../../src/classify/index.ts';
import type { PullClass, StuckReason } from '../../src/model.ts';

interface Names {
  host: string;
  /** Repository path on the host. */
  repo: string;
  /** `:tag` or `@sha256:…`. */
  object: string;
}

const ref = (n: Names): string => `${n.host}/${n.repo}${n.object}`;
const repository = (n: Names): string => `${n.host}/${n.repo}`;
const tagOrDigest = (n: Names): string => n.object.slice(1);
/** The name Docker prints (reference.FamiliarName): no docker.io/, no library/. */
const familiar = (n: Names): string => (n.host === 'docker.io' ? n.repo.replace(/^library\//, '') : repository(n));
const hostname = (n: Names): string => n.host.replace(/:\d+$/, '');
const DIGEST = 'sha256:b22c7289dd3b4785a3795c90e15d16bd66bd29b444b8974fe29ed0443ce50405';

interface Template {
  /** Runtime, version and the file (or issue) the form comes from. */
  source: string;
  reason: StuckReason;
  expected: PullClass;
  message: (n: Names) => string;
}

const CTRD = (n: Names) => `failed to pull and unpack image "${ref(n)}": failed to resolve reference "${ref(n)}"`;

const TEMPLATES: Template[] = [
  {
    source: 'containerd 1.6.20 remotes/docker/resolver.go, recorded on the test node (auth-no-secret)',
    reason: 'ErrImagePull',
    expected: 'auth',
    message: (n) => `${CTRD(n)}: pulling from host ${n.host} failed with status code [manifests ${tagOrDigest(n)}]: 401 Unauthorized`,
  },
  {
    source: 'containerd 1.6.20 remotes/docker/resolver.go, recorded on the test node (too-many-requests)',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) => `${CTRD(n)}: pulling from host ${n.host} failed with status code [manifests ${tagOrDigest(n)}]: 429 Too Many Requests`,
  },
  {
    source: 'containerd 1.6.20 remotes/docker/resolver.go, recorded on the test node (tag-missing)',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) => `rpc error: code = NotFound desc = ${CTRD(n)}: ${ref(n)}: not found`,
  },
  {
    source: 'containerd 1.6.20 remotes/docker/fetcher.go, recorded on the test node (too-many-requests-on-fetch)',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `failed to pull and unpack image "${ref(n)}": failed to copy: httpReadSeeker: failed open: unexpected status code ` +
      `https://${n.host}/v2/${n.repo}/manifests/${DIGEST}: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.`,
  },
  {
    source: 'containerd 2.x core/remotes/docker/resolver.go (unexpectedResponseErr)',
    reason: 'ErrImagePull',
    expected: 'auth',
    message: (n) =>
      `${CTRD(n)}: unexpected status from HEAD request to https://${n.host}/v2/${n.repo}/manifests/${tagOrDigest(n)}: 401 Unauthorized`,
  },
  {
    source: 'containerd 2.x core/remotes/docker/fetcher.go (open: content at URL not found)',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `rpc error: code = NotFound desc = failed to pull and unpack image "${ref(n)}": failed to copy: httpReadSeeker: failed open: ` +
      `content at https://${n.host}/v2/${n.repo}/blobs/${DIGEST} not found: not found`,
  },
  {
    source: 'containerd 2.x core/remotes/docker/fetcher.go (could not fetch content descriptor)',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `rpc error: code = NotFound desc = failed to pull and unpack image "${ref(n)}": failed to copy: httpReadSeeker: failed open: ` +
      `could not fetch content descriptor ${DIGEST} (application/vnd.oci.image.layer.v1.tar+gzip) from remote: not found`,
  },
  {
    source: 'containerd 1.7.5 pkg/cri/server/image_pull.go progress timeout, kubernetes/kubernetes#131521',
    reason: 'ErrImagePull',
    expected: 'stalled',
    message: (n) => `rpc error: code = Canceled desc = failed to pull and unpack image "${ref(n)}": context canceled`,
  },
  {
    source: 'containerd 1.7 pkg/cri/server/image_pull.go, kubelet v1.32+ back-off wrapping (image_manager.go)',
    reason: 'ImagePullBackOff',
    expected: 'stalled',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": ErrImagePull: rpc error: code = Canceled desc = failed to pull and unpack image "${ref(n)}": context canceled`,
  },
  {
    source: 'containerd 2.x client/pull.go (platform matcher: no match for platform in manifest)',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `rpc error: code = NotFound desc = failed to pull and unpack image "${ref(n)}": no match for platform in manifest: not found`,
  },
  {
    source: 'containerd v2.0 schema-1 refusal (kubelet event quoted publicly)',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `failed to pull and unpack image "${ref(n)}": failed to get converter for "${ref(n)}": Pulling Schema 1 images have been ` +
      'deprecated and disabled by default since containerd v2.0. As a workaround you may set an environment variable ' +
      '`CONTAINERD_ENABLE_DEPRECATED_PULL_SCHEMA_1_IMAGE=1`, but this will be completely removed in containerd v2.1.',
  },
  {
    source: 'containers/image docker/docker_image_src.go (fetchManifest) under CRI-O: manifest unknown',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) => `initializing source docker://${ref(n)}: reading manifest ${tagOrDigest(n)} in ${repository(n)}: manifest unknown`,
  },
  {
    source: 'containers/image docker/docker_image_src.go (fetchManifest) under CRI-O: quay unauthorized',
    reason: 'ErrImagePull',
    expected: 'auth',
    message: (n) =>
      `initializing source docker://${ref(n)}: reading manifest ${tagOrDigest(n)} in ${repository(n)}: unauthorized: access to the requested resource is not authorized`,
  },
  {
    source: 'containers/image docker/docker_image_src.go (fetchManifest) under CRI-O: Docker Hub rate limit',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `initializing source docker://${ref(n)}: reading manifest ${tagOrDigest(n)} in ${repository(n)}: toomanyrequests: You have reached your pull rate limit.`,
  },
  {
    source: 'containers/image docker/docker_client.go (detectProperties) under CRI-O: DNS failure',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `initializing source docker://${ref(n)}: pinging container registry ${n.host}: Get "https://${n.host}/v2/": dial tcp: lookup ${hostname(n)} on 10.96.0.10:53: no such host`,
  },
  {
    source: 'containers/image docker/docker_image_src.go mirror fallback, (Mirrors also failed: [REF: ...]): REF',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `initializing source docker://${ref(n)}: (Mirrors also failed: [mirror.example.com/${n.repo}${n.object}: reading manifest ${tagOrDigest(n)} in ` +
      `mirror.example.com/${n.repo}: manifest unknown]): ${ref(n)}: reading manifest ${tagOrDigest(n)} in ${repository(n)}: manifest unknown`,
  },
  {
    source: 'kubelet pkg/kubelet/images/image_manager.go (evalCRIPullErr) over CRI-O server/image_pull.go RegistryUnavailable',
    reason: 'ImagePullBackOff',
    expected: 'transient',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": RegistryUnavailable: image pull failed for ${ref(n)} because the registry is unavailable: ` +
      `pinging container registry ${n.host}: Get "https://${n.host}/v2/": dial tcp 10.0.0.2:443: connect: connection refused`,
  },
  {
    source: 'kubelet pkg/kubelet/images/image_manager.go (evalCRIPullErr) over CRI-O signature policy',
    reason: 'SignatureValidationFailed',
    expected: 'permanent',
    message: (n) =>
      `image pull failed for ${ref(n)} because the signature validation failed: Source image rejected: A signature was required, but no signature exists`,
  },
  {
    source: 'kubelet image_manager.go imagePullPrecheck (ImageInspectError) over CRI-O internal/storage/image.go short names',
    reason: 'ImageInspectError',
    expected: 'permanent',
    message: (n) =>
      `Failed to inspect image "${familiar(n)}${n.object}": rpc error: code = Unknown desc = short-name "${familiar(n)}${n.object}" did not resolve to an alias ` +
      'and no unqualified-search registries are defined in "/etc/containers/registries.conf"',
  },
  {
    source: 'moby distribution/errors.go (TranslatePullError: manifest for %s not found) via cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) => `Error response from daemon: manifest for ${familiar(n)}${n.object} not found: manifest unknown: manifest unknown`,
  },
  {
    source: 'moby distribution/errors.go (TranslatePullError: pull access denied for %s) via cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'auth',
    message: (n) =>
      `Error response from daemon: pull access denied for ${familiar(n)}, repository does not exist or may require 'docker login': ` +
      'denied: requested access to the resource is denied',
  },
  {
    source: 'moby distribution/errors.go (TranslatePullError: repository %s not found) via cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) => `Error response from daemon: repository ${familiar(n)} not found: name unknown: repository name not known to registry`,
  },
  {
    source: 'containerd 2.x core/remotes/errors (ErrUnexpectedStatus with body): registry JSON naming the repository',
    reason: 'ErrImagePull',
    expected: 'auth',
    message: (n) =>
      `${CTRD(n)}: unexpected status from GET request to https://${n.host}/v2/${n.repo}/manifests/${tagOrDigest(n)}: 401 Unauthorized: ` +
      `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":[{"Type":"repository","Class":"","Name":"${n.repo}","Action":"pull"}]}]}`,
  },
];

// Names a user could give, made of the words the class rules look for.
const HOSTS = [
  'registry.example.com',
  'docker.io',
  'timeout.example.com',
  'unauthorized.eof.io:5000',
  'localhost:5000',
  '10.0.0.7',
  'x509.denied-429.example',
];
const REPOS = [
  'acme/app',
  'library/eof',
  'acme/access-denied-fix',
  'not-found/unauthorized',
  'team/x509-tls-timeout',
  'rate-limit/toomanyrequests',
  'library/denied',
];
const OBJECTS = [
  ':1',
  ':fix-timeout',
  ':access-denied-fix',
  ':not-found',
  ':429',
  ':unauthorized',
  ':eof',
  ':x509',
  ':EOF.TLS_timeout',
  ':manifest-unknown',
  ':context-canceled',
  ':no-such-host',
  ':503',
  ':forbidden',
  `@${DIGEST}`,
];

function* allNames(): Generator<Names> {
  for (const host of HOSTS) for (const repo of REPOS) for (const object of OBJECTS) yield { host, repo, object };
}

describe('classification never depends on the image reference', () => {
  for (const t of TEMPLATES) {
    it(`${t.expected}: ${t.source}`, () => {
      const wrong: string[] = [];
      for (const n of allNames()) {
        const message = t.message(n);
        for (const image of [ref(n), undefined]) {
          const got = explainPullFailure(t.reason, message, image);
          if (got.pullClass !== t.expected)
            wrong.push(`${got.pullClass} (${got.decidedBy}) for ${ref(n)}${image ? '' : ' without the image'}: ${message}`);
        }
      }
      assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} wrong`);
    });
  }

  it('leaves no name words behind in the text the rules read', () => {
    const n: Names = { host: 'unauthorized.eof.io:5000', repo: 'access-denied/fix-timeout', object: ':x509-429' };
    for (const t of TEMPLATES) {
      const text = stripImageReferences(t.message(n).replace(/^Back-off pulling image "[^"]*": \w+: /, ''), ref(n));
      assert.doesNotMatch(text, /fix-timeout|access-denied|x509-429|unauthorized\.eof/, t.source);
    }
  });
});
