import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  classifyPullFailure,
  describeClassification,
  explainPullFailure,
  imageReferenceNames,
  PULL_CLASS_RULES,
  repositoryOf,
  stripImageReferences,
  unwrapBackOff,
} from '../../src/classify/index.ts';
import { PULL_CLASSES, PULL_FAILURE_CLASSES, STUCK_REASONS, type PullClass, type StuckReason } from '../../src/model.ts';
import { FAMILY_FIXTURES } from './pull-families.ts';
import { REAL_NODE, recordedCase, recordedMessage } from './real-node.ts';

interface Case {
  name: string;
  reason: StuckReason;
  message: string;
  image?: string;
  expected: PullClass;
}

const CTRD = 'rpc error: code = Unknown desc = failed to pull and unpack image';
// Messages the real kubelet + containerd wrote on the test node (test/fixtures/real-node-statuses.json).
const CTRD_NOT_FOUND = recordedMessage('tag-missing', 'ErrImagePull');
const NOT_FOUND_IMAGE = recordedCase('tag-missing').image;
const CTRD_401 = recordedMessage('auth-no-secret', 'ErrImagePull');
const CTRD_DNS = recordedMessage('unresolvable-host', 'ErrImagePull');
const CTRD_REFUSED = recordedMessage('connection-refused', 'ErrImagePull');
// The transient answers came from loopback registry stand-ins (test/support/registry-faults.ts).
const CTRD_429 = recordedMessage('too-many-requests', 'ErrImagePull');
const CTRD_429_FETCH = recordedMessage('too-many-requests-on-fetch', 'ErrImagePull');
const CTRD_503 = recordedMessage('service-unavailable', 'ErrImagePull');
const CTRD_TOKEN_503 = recordedMessage('token-unavailable', 'ErrImagePull');
const CTRD_X509 = recordedMessage('untrusted-certificate', 'ErrImagePull');
const CTRD_DENIED =
  `${CTRD} "docker.io/acme/private:1": failed to resolve reference "docker.io/acme/private:1": ` +
  'pull access denied, repository does not exist or may require authorization: server message: ' +
  'insufficient_scope: authorization failed';
const CTRD_TIMEOUT =
  `${CTRD} "10.0.0.1/app:1": failed to resolve reference "10.0.0.1/app:1": failed to do request: ` +
  'Head "https://10.0.0.1/v2/app/manifests/1": dial tcp 10.0.0.1:443: i/o timeout';
const CRIO_MANIFEST_UNKNOWN =
  'initializing source docker://busybox:nope: reading manifest nope in docker.io/library/busybox: manifest unknown';
const CRIO_DENIED =
  'initializing source docker://acme/private:1: reading manifest 1 in docker.io/acme/private: requested access to the resource is denied';
const CRIO_UNAUTHORIZED =
  'initializing source docker://acr.azurecr.io/app:1: reading manifest 1 in acr.azurecr.io/app: unauthorized: ' +
  'authentication required, visit https://aka.ms/acr/authorization for more information.';

// containerd 1.7.5, kubernetes/kubernetes#131521: the progress timeout cancelled the pull.
const CANCELED_IMAGE = 'private_registery.mydomain/csg/idrac_to_kafka:20250429T0012';
const CTRD_CANCELED = `rpc error: code = Canceled desc = failed to pull and unpack image "${CANCELED_IMAGE}": context canceled`;

const backOff = (image: string, cause: string, reason = 'ErrImagePull'): string => `Back-off pulling image "${image}": ${reason}: ${cause}`;

const CASES: Case[] = [
  // permanent
  { name: 'containerd: tag not found', reason: 'ErrImagePull', message: CTRD_NOT_FOUND, expected: 'permanent' },
  {
    name: 'containerd: ghcr tag not found',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = NotFound desc = failed to pull and unpack image "ghcr.io/acme/app:v9": failed to resolve reference ' +
      '"ghcr.io/acme/app:v9": ghcr.io/acme/app:v9: not found',
    expected: 'permanent',
  },
  { name: 'CRI-O: manifest unknown', reason: 'ErrImagePull', message: CRIO_MANIFEST_UNKNOWN, image: 'busybox:nope', expected: 'permanent' },
  {
    name: 'CRI-O: name unknown',
    reason: 'ErrImagePull',
    message:
      'initializing source docker://registry.example.com/acme/nope:1: reading manifest 1 in registry.example.com/acme/nope: ' +
      'name unknown: repository name not known to registry',
    expected: 'permanent',
  },
  {
    name: 'docker: manifest for x not found',
    reason: 'ErrImagePull',
    message: 'Error response from daemon: manifest for acme/app:v2 not found: manifest unknown: manifest unknown',
    expected: 'permanent',
  },
  {
    name: 'containerd: no match for platform',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/acme/amd64only:1": no match for platform in manifest: not found',
    expected: 'permanent',
  },
  {
    name: 'CRI-O: no image for architecture',
    reason: 'ErrImagePull',
    message:
      'initializing source docker://acme/amd64only:1: choosing image instance: no image found in manifest list for architecture arm64, variant "v8", OS linux',
    expected: 'permanent',
  },
  {
    name: 'CRI-O: 404 Not Found',
    reason: 'ErrImagePull',
    message: 'reading manifest 1 in registry.example.com/acme/app: received unexpected HTTP status: 404 Not Found',
    expected: 'permanent',
  },
  {
    name: 'containerd: invalid reference format',
    reason: 'ErrImagePull',
    message: `${CTRD} "docker.io/Acme/App:1": failed to resolve reference "docker.io/Acme/App:1": invalid reference format: repository name must be lowercase`,
    expected: 'permanent',
  },
  {
    name: 'InvalidImageName',
    reason: 'InvalidImageName',
    message: recordedMessage('invalid-name', 'InvalidImageName'),
    expected: 'permanent',
  },
  {
    name: 'InvalidImageName is decisive whatever the message',
    reason: 'InvalidImageName',
    message: 'Failed to apply default image tag "x": dial tcp: i/o timeout',
    expected: 'permanent',
  },
  {
    name: 'ErrImageNeverPull',
    reason: 'ErrImageNeverPull',
    message: recordedMessage('never-pull', 'ErrImageNeverPull'),
    expected: 'permanent',
  },
  {
    name: 'ErrImageNeverPull with a cue-like image name',
    reason: 'ErrImageNeverPull',
    message: 'Container image "acme/timeout-unauthorized:1" is not present with pull policy of Never',
    expected: 'permanent',
  },
  {
    name: 'SignatureValidationFailed defaults to permanent',
    reason: 'SignatureValidationFailed',
    message:
      'image pull failed for quay.io/acme/app:1 because the signature validation failed: Source image rejected: A signature was required, but no signature exists',
    expected: 'permanent',
  },
  {
    name: 'back-off: not found',
    reason: 'ImagePullBackOff',
    message: recordedMessage('tag-missing', 'ImagePullBackOff'),
    expected: 'permanent',
  },
  {
    name: 'back-off: CRI-O manifest unknown',
    reason: 'ImagePullBackOff',
    message: backOff('busybox:nope', CRIO_MANIFEST_UNKNOWN),
    expected: 'permanent',
  },

  // auth
  {
    name: 'containerd: Docker Hub pull access denied + insufficient_scope',
    reason: 'ErrImagePull',
    message: CTRD_DENIED,
    expected: 'auth',
  },
  {
    name: "docker: pull access denied ... may require 'docker login'",
    reason: 'ErrImagePull',
    message:
      "Error response from daemon: pull access denied for acme/private, repository does not exist or may require 'docker login': " +
      'denied: requested access to the resource is denied',
    expected: 'auth',
  },
  { name: 'containerd: manifests 401 Unauthorized', reason: 'ErrImagePull', message: CTRD_401, expected: 'auth' },
  {
    name: 'containerd: oauth token 403 Forbidden',
    reason: 'ErrImagePull',
    message:
      `${CTRD} "europe-docker.pkg.dev/p/r/app:1": failed to resolve reference "europe-docker.pkg.dev/p/r/app:1": failed to authorize: ` +
      'failed to fetch oauth token: unexpected status from GET request to ' +
      'https://europe-docker.pkg.dev/v2/token?scope=repository%3Ap%2Fr%2Fapp%3Apull&service=europe-docker.pkg.dev: 403 Forbidden',
    expected: 'auth',
  },
  {
    name: 'ECR: no basic auth credentials',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = Unknown desc = Error response from daemon: Get https://123456789012.dkr.ecr.us-east-1.amazonaws.com/v2/app/manifests/1: no basic auth credentials',
    expected: 'auth',
  },
  {
    name: 'ECR: expired token',
    reason: 'ErrImagePull',
    message: `${CTRD} "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1": Your authorization token has expired. Reauthenticate and try again.`,
    expected: 'auth',
  },
  {
    name: 'CRI-O: quay not authorized',
    reason: 'ErrImagePull',
    message:
      'initializing source docker://quay.io/acme/private:1: reading manifest 1 in quay.io/acme/private: unauthorized: access to the requested resource is not authorized',
    expected: 'auth',
  },
  { name: 'CRI-O: Docker Hub requested access denied', reason: 'ErrImagePull', message: CRIO_DENIED, expected: 'auth' },
  { name: 'CRI-O: ACR authentication required', reason: 'ErrImagePull', message: CRIO_UNAUTHORIZED, expected: 'auth' },
  {
    name: 'registry JSON body with status code 401',
    reason: 'ErrImagePull',
    message: 'unexpected status code 401: {"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}',
    expected: 'auth',
  },
  {
    name: 'upper-case registry error code survives quote stripping',
    reason: 'ErrImagePull',
    message: 'reading manifest 1 in registry.example.com/acme/app: errors: {"code":"DENIED"}',
    expected: 'auth',
  },
  { name: 'back-off: Docker Hub denied', reason: 'ImagePullBackOff', message: backOff('acme/private:1', CTRD_DENIED), expected: 'auth' },
  {
    name: 'back-off: CRI-O unauthorized',
    reason: 'ImagePullBackOff',
    message: backOff('acr.azurecr.io/app:1', CRIO_UNAUTHORIZED),
    expected: 'auth',
  },

  // transient
  { name: 'containerd: 429 Too Many Requests on the manifest HEAD', reason: 'ErrImagePull', message: CTRD_429, expected: 'transient' },
  { name: 'containerd: 429 toomanyrequests on the manifest GET', reason: 'ErrImagePull', message: CTRD_429_FETCH, expected: 'transient' },
  { name: 'kubelet: pull QPS exceeded', reason: 'ErrImagePull', message: 'pull QPS exceeded', expected: 'transient' },
  { name: 'containerd: 503 Service Unavailable', reason: 'ErrImagePull', message: CTRD_503, expected: 'transient' },
  {
    name: 'CRI-O: 502 Bad Gateway',
    reason: 'ErrImagePull',
    message: 'reading manifest 1 in registry.example.com/acme/app: received unexpected HTTP status: 502 Bad Gateway',
    expected: 'transient',
  },
  {
    name: 'containerd: 500 Internal Server Error',
    reason: 'ErrImagePull',
    message: `${CTRD} "quay.io/acme/app:1": failed to copy: httpReadSeeker: failed open: unexpected status code https://quay.io/v2/acme/app/blobs/sha256:1: 500 Internal Server Error`,
    expected: 'transient',
  },
  {
    name: 'containerd: 504 Gateway Timeout',
    reason: 'ErrImagePull',
    message: `${CTRD} "quay.io/acme/app:1": unexpected status from HEAD request to https://quay.io/v2/acme/app/manifests/1: 504 Gateway Timeout`,
    expected: 'transient',
  },
  { name: 'containerd: DNS no such host', reason: 'ErrImagePull', message: CTRD_DNS, expected: 'transient' },
  {
    name: 'bare dial tcp DNS error',
    reason: 'ErrImagePull',
    message: 'dial tcp: lookup registry.example on 10.96.0.10:53: no such host',
    expected: 'transient',
  },
  { name: 'containerd: i/o timeout', reason: 'ErrImagePull', message: CTRD_TIMEOUT, expected: 'transient' },
  {
    name: 'containerd: x509 unknown authority (SPEC: TLS is transient)',
    reason: 'ErrImagePull',
    message: CTRD_X509,
    expected: 'transient',
  },
  { name: 'connection refused', reason: 'ErrImagePull', message: CTRD_REFUSED, expected: 'transient' },
  {
    name: 'connection reset by peer',
    reason: 'ErrImagePull',
    message: `${CTRD} "docker.io/library/nginx:1": failed to copy: read tcp 10.244.1.5:51234->104.18.121.25:443: read: connection reset by peer`,
    expected: 'transient',
  },
  {
    name: 'TLS handshake timeout',
    reason: 'ErrImagePull',
    message: `${CTRD} "docker.io/library/nginx:1": failed to do request: Head "https://registry-1.docker.io/v2/library/nginx/manifests/1": net/http: TLS handshake timeout`,
    expected: 'transient',
  },
  {
    name: 'context deadline exceeded',
    reason: 'ErrImagePull',
    message: 'rpc error: code = DeadlineExceeded desc = context deadline exceeded',
    expected: 'transient',
  },
  {
    name: 'net/http: request canceled',
    reason: 'ErrImagePull',
    message:
      'Error response from daemon: Get "https://registry.example.com/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)',
    expected: 'transient',
  },
  {
    // kubernetes/kubernetes#58526 (dockershim era, code 2 = Unknown): a client timeout, not a progress cancel.
    name: 'net/http: request canceled without a timeout word',
    reason: 'ErrImagePull',
    message: 'rpc error: code = 2 desc = net/http: request canceled',
    expected: 'transient',
  },
  {
    // containerd 1.7 pkg/cri/server/image_pull.go wrapper as a kubelet before cri-client dropped the
    // Unknown code would show it, had the runtime lost the Canceled code: still containerd's cancel.
    name: 'containerd: cancelled pull under code Unknown',
    reason: 'ErrImagePull',
    message: `rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/acme/big:1": failed to copy: httpReadSeeker: failed open: context canceled`,
    expected: 'stalled',
  },
  {
    name: 'EOF',
    reason: 'ErrImagePull',
    message: `${CTRD} "docker.io/library/nginx:1": failed to copy: httpReadSeeker: failed open: failed to do request: Get "https://registry-1.docker.io/v2/": EOF`,
    expected: 'transient',
  },
  {
    name: 'CRI-O: no route to host',
    reason: 'ErrImagePull',
    message:
      'pinging container registry registry.example.com: Get "https://registry.example.com/v2/": dial tcp 10.0.0.2:443: connect: no route to host',
    expected: 'transient',
  },
  {
    name: 'RegistryUnavailable reason',
    reason: 'RegistryUnavailable',
    message: 'image pull failed for registry.example.com/app:1 because the registry is unavailable: mirror down',
    expected: 'transient',
  },
  {
    name: 'precedence: 5xx inside an auth token fetch is transient',
    reason: 'ErrImagePull',
    message: CTRD_TOKEN_503,
    expected: 'transient',
  },
  {
    name: 'precedence: DNS failure fetching an anonymous token is transient',
    reason: 'ErrImagePull',
    message:
      'failed to authorize: failed to fetch anonymous token: Get "https://auth.docker.io/token?scope=repository%3Aacme%2Fapp%3Apull": ' +
      'dial tcp: lookup auth.docker.io: no such host',
    expected: 'transient',
  },
  {
    name: 'back-off: 429',
    reason: 'ImagePullBackOff',
    message: recordedMessage('too-many-requests', 'ImagePullBackOff'),
    expected: 'transient',
  },
  {
    name: 'back-off: 429 on the manifest GET',
    reason: 'ImagePullBackOff',
    message: recordedMessage('too-many-requests-on-fetch', 'ImagePullBackOff'),
    expected: 'transient',
  },
  {
    name: 'back-off: pull QPS exceeded',
    reason: 'ImagePullBackOff',
    message: backOff('nginx', 'pull QPS exceeded'),
    expected: 'transient',
  },
  {
    name: 'back-off: 503',
    reason: 'ImagePullBackOff',
    message: recordedMessage('service-unavailable', 'ImagePullBackOff'),
    expected: 'transient',
  },
  {
    name: 'back-off: 503 from the token endpoint',
    reason: 'ImagePullBackOff',
    message: recordedMessage('token-unavailable', 'ImagePullBackOff'),
    expected: 'transient',
  },
  {
    name: 'back-off: DNS',
    reason: 'ImagePullBackOff',
    message: recordedMessage('unresolvable-host', 'ImagePullBackOff'),
    expected: 'transient',
  },
  {
    name: 'back-off: x509',
    reason: 'ImagePullBackOff',
    message: recordedMessage('untrusted-certificate', 'ImagePullBackOff'),
    expected: 'transient',
  },
  {
    name: 'back-off: embedded RegistryUnavailable',
    reason: 'ImagePullBackOff',
    message: backOff(
      'registry.example.com/app:1',
      'image pull failed for registry.example.com/app:1 because the registry is unavailable',
      'RegistryUnavailable',
    ),
    expected: 'transient',
  },

  // unknown
  {
    name: 'bare older back-off',
    reason: 'ImagePullBackOff',
    message: 'Back-off pulling image "docker.io/library/nope:1"',
    expected: 'unknown',
  },
  {
    name: 'bare back-off with cue-like image name',
    reason: 'ImagePullBackOff',
    message: 'Back-off pulling image "acme/denied-429-timeout:1"',
    expected: 'unknown',
  },
  { name: 'empty message', reason: 'ErrImagePull', message: '', expected: 'unknown' },
  {
    name: 'ImageInspectError',
    reason: 'ImageInspectError',
    message: 'Failed to inspect image "acme/app:1": rpc error: code = Unknown desc = layer does not exist in storage',
    expected: 'unknown',
  },
  {
    name: 'node-local permission denied is not auth',
    reason: 'ErrImagePull',
    message: `${CTRD} "docker.io/library/nginx:1": failed to extract layer sha256:8d7e: mount callback failed on /var/lib/containerd/tmpmounts/containerd-mount1: permission denied`,
    expected: 'unknown',
  },
  {
    name: 'no space left on device',
    reason: 'ErrImagePull',
    message: `${CTRD} "docker.io/library/nginx:1": failed to copy: write /var/lib/containerd/ingest/1/data: no space left on device`,
    expected: 'unknown',
  },
  {
    name: 'plain-HTTP registry misconfiguration',
    reason: 'ErrImagePull',
    message: `${CTRD} "registry.local:5000/app:1": failed to do request: Head "https://registry.local:5000/v2/app/manifests/1": http: server gave HTTP response to HTTPS client`,
    expected: 'unknown',
  },

  // stalled: the runtime cancelled a pull that made no progress
  {
    // containerd 1.7.5, kubernetes/kubernetes#131521 (image_pull_progress_timeout, pkg/cri/server/image_pull.go)
    name: 'containerd 1.7: pull cancelled for no progress',
    reason: 'ErrImagePull',
    message: CTRD_CANCELED,
    expected: 'stalled',
  },
  {
    name: 'containerd 1.7: back-off over the cancelled pull (kubelet v1.32+ wrapping)',
    reason: 'ImagePullBackOff',
    message: backOff(CANCELED_IMAGE, CTRD_CANCELED),
    expected: 'stalled',
  },
  {
    // CRI-O 1.31.2, cri-o/cri-o#8760 (pull_progress_timeout, server/image_pull.go; cri-o/cri-o#7887)
    name: 'CRI-O: pull cancelled for no progress',
    reason: 'ErrImagePull',
    message: 'rpc error: code = Canceled desc = copying system image from manifest list: copying config: context canceled',
    expected: 'stalled',
  },
  {
    // containerd 2.x internal/cri/server/images/image_pull.go wraps the cancel the same way, with or
    // without the gRPC status prefix the kubelet may drop.
    name: 'containerd 2.x: cancelled pull without the status prefix',
    reason: 'ErrImagePull',
    message: 'failed to pull and unpack image "docker.io/acme/big:1": context canceled',
    expected: 'stalled',
  },

  // images the runtime can never pull
  {
    // containers/image v5 internal/manifest/oci_index.go (chooseInstance), as CRI-O reports it (cri-o/cri-o#8283 form)
    name: 'CRI-O: no image in the OCI image index for this platform',
    reason: 'ErrImagePull',
    message: 'choosing image instance: no image found in image index for architecture "arm64", variant "v8", OS "linux"',
    expected: 'permanent',
  },
  {
    // moby distribution/pull_v2.go, through cri-dockerd (Docker Engine's daemon error)
    name: 'Docker Engine: no matching manifest for the platform',
    reason: 'ErrImagePull',
    message: 'Error response from daemon: no matching manifest for linux/arm64/v8 in the manifest list entries',
    expected: 'permanent',
  },
  {
    // containerd v2.0 refusing a schema-1 manifest, as quoted in a public kubelet `Failed to pull image` event
    name: 'containerd 2.0: schema 1 refused',
    reason: 'ErrImagePull',
    message:
      'failed to pull and unpack image "registry.k8s.io/nginx-slim:0.8": failed to get converter for "registry.k8s.io/nginx-slim:0.8": ' +
      'Pulling Schema 1 images have been deprecated and disabled by default since containerd v2.0. As a workaround you may set an ' +
      'environment variable `CONTAINERD_ENABLE_DEPRECATED_PULL_SCHEMA_1_IMAGE=1`, but this will be completely removed in containerd v2.1.',
    expected: 'permanent',
  },
  {
    // containerd v2.1 client/pull.go (fetch): errdefs.ErrNotImplemented -> gRPC Unimplemented
    name: 'containerd 2.1: schema 1 media type no longer supported',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = Unimplemented desc = failed to pull and unpack image "docker.io/acme/old:1": not implemented: media type ' +
      '"application/vnd.docker.distribution.manifest.v1+prettyjws" is no longer supported since containerd v2.1, please rebuild the image as ' +
      '"application/vnd.docker.distribution.manifest.v2+json" or "application/vnd.oci.image.manifest.v1+json"',
    expected: 'permanent',
  },
  {
    // kubelet pkg/kubelet/images/image_manager.go imagePullPrecheck (ImageInspectError: the CRI ImageStatus
    // call failed) over CRI-O internal/storage/image.go CandidatesForPotentiallyShortImageName
    // (text asserted in its internal/storage/image_test.go); a real pod status quoted in a public test fixture.
    name: 'CRI-O: short name that resolves nowhere (ImageInspectError)',
    reason: 'ImageInspectError',
    message:
      'Failed to inspect image "maintained/tcpdump": rpc error: code = Unknown desc = short-name "maintained/tcpdump:latest" did not resolve ' +
      'to an alias and no unqualified-search registries are defined in "/etc/containers/registries.conf.d/01-unqualified.conf"',
    expected: 'permanent',
  },
  {
    // Same CRI-O text on the pull path (imagePullPolicy Always skips the inspect): server/image_pull.go
    name: 'CRI-O: short name that resolves nowhere (ErrImagePull)',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = Unknown desc = short-name "app:1" did not resolve to an alias and no unqualified-search registries are defined in "/etc/containers/registries.conf"',
    image: 'app:1',
    expected: 'permanent',
  },

  // tags and hosts printed apart from the repository
  {
    // issue 16: containers/image docker/docker_image_src.go `reading manifest TAG in REPO` under CRI-O
    name: 'CRI-O: tag fix-timeout printed apart (was transient)',
    reason: 'ErrImagePull',
    message:
      'initializing source docker://quay.io/acme/worker:fix-timeout: reading manifest fix-timeout in quay.io/acme/worker: manifest unknown',
    image: 'quay.io/acme/worker:fix-timeout',
    expected: 'permanent',
  },
  {
    name: 'CRI-O: tag access-denied-fix printed apart (was auth)',
    reason: 'ErrImagePull',
    message:
      'initializing source docker://quay.io/acme/worker:access-denied-fix: reading manifest access-denied-fix in quay.io/acme/worker: manifest unknown',
    expected: 'permanent',
  },
  {
    // containerd <= 1.6.24 remotes/docker/resolver.go; real message in kubernetes/kubernetes#110675
    name: 'containerd 1.6: [manifests TAG] with a cue word in the tag',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = Unknown desc = failed to pull and unpack image "registry.app.example.net/spm2fog/partsgo42:GitActionsNew-timeout-2e7e": ' +
      'failed to resolve reference "registry.app.example.net/spm2fog/partsgo42:GitActionsNew-timeout-2e7e": pulling from host ' +
      'registry.app.example.net failed with status code [manifests GitActionsNew-timeout-2e7e]: 401 Unauthorized',
    expected: 'auth',
  },
  {
    // containerd 2.x core/remotes/docker/resolver.go: a mirror's 404 for an upstream that is down (issue 16)
    name: 'containerd 2.x: mirror answers not found',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nginx:1.27": failed to resolve reference ' +
      '"docker.io/library/nginx:1.27": docker.io/library/nginx:1.27: not found',
    expected: 'permanent',
  },
  {
    // moby distribution/errors.go (TranslatePullError) through cri-dockerd: familiar name, no host
    name: 'Docker Engine: pull access denied for a name made of cue words',
    reason: 'ErrImagePull',
    message:
      "Error response from daemon: pull access denied for timeout-eof, repository does not exist or may require 'docker login': " +
      'denied: requested access to the resource is denied',
    expected: 'auth',
  },

  // image names must not drive the class
  {
    name: 'quoted image name containing denied/404',
    reason: 'ErrImagePull',
    message:
      'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/acme/denied-404:1": failed to resolve reference ' +
      '"docker.io/acme/denied-404:1": docker.io/acme/denied-404:1: not found',
    expected: 'permanent',
  },
  {
    name: 'unquoted CRI-O image name containing timeout',
    reason: 'ErrImagePull',
    message: 'initializing source docker://quay.io/acme/timeout-svc:1: reading manifest 1 in quay.io/acme/timeout-svc: manifest unknown',
    expected: 'permanent',
  },
  {
    name: 'unquoted Docker Hub short name containing unauthorized',
    reason: 'ErrImagePull',
    message: 'reading manifest 1 in docker.io/library/unauthorized-app: manifest unknown',
    image: 'unauthorized-app:1',
    expected: 'permanent',
  },
  {
    name: 'single-word image named like a cue',
    reason: 'ErrImagePull',
    message: 'initializing source docker://denied:latest: reading manifest latest in docker.io/library/denied: manifest unknown',
    image: 'denied',
    expected: 'permanent',
  },
  {
    name: 'repository path in a URL containing eof',
    reason: 'ErrImagePull',
    message:
      `${CTRD} "registry.example.com/acme/eof-tools:1": unexpected status from HEAD request to ` +
      'https://registry.example.com/v2/acme/eof-tools/manifests/1: 401 Unauthorized',
    expected: 'auth',
  },
  {
    name: 'image pull failed for <unquoted image> because ...',
    reason: 'SignatureValidationFailed',
    message: 'image pull failed for acme/eof:1 because the signature validation failed: Source image rejected: no signature exists',
    image: 'acme/eof:1',
    expected: 'permanent',
  },
];

describe('classifyPullFailure: every message recorded on the real node', () => {
  for (const c of REAL_NODE.cases) {
    for (const reason of Object.keys(c.pods)) {
      it(`${c.expectedClass}: ${c.title} (${reason})`, () => {
        assert.equal(classifyPullFailure(reason as StuckReason, recordedMessage(c.id, reason), c.image), c.expectedClass);
      });
    }
  }
});

describe('explainPullFailure: the transient registry answers recorded on the real node, by the rule for their cause', () => {
  const cue = (pattern: RegExp): string => PULL_CLASS_RULES.find((r) => pattern.test(r.cue))!.cue;
  const expected: [string, string][] = [
    ['too-many-requests', cue(/^429/)],
    ['too-many-requests-on-fetch', cue(/^429/)],
    ['service-unavailable', cue(/^5xx/)],
    // The message also says "failed to authorize": a 5xx while fetching a token is not an auth failure.
    ['token-unavailable', cue(/^5xx/)],
    ['untrusted-certificate', cue(/^TLS/)],
  ];
  for (const [id, decidedBy] of expected) {
    for (const reason of ['ErrImagePull', 'ImagePullBackOff'] as const) {
      it(`${id} (${reason}): ${decidedBy}`, () => {
        const got = explainPullFailure(reason, recordedMessage(id, reason), recordedCase(id).image);
        assert.deepEqual([got.pullClass, got.decidedBy, got.reason], ['transient', decidedBy, 'ErrImagePull']);
      });
    }
  }
});

describe('classifyPullFailure: real kubelet / containerd / CRI-O messages', () => {
  for (const c of CASES) {
    it(`${c.expected}: ${c.name}`, () => {
      const got = explainPullFailure(c.reason, c.message, c.image);
      assert.equal(got.pullClass, c.expected, `decided by: ${got.decidedBy}`);
      assert.equal(classifyPullFailure(c.reason, c.message, c.image), c.expected);
    });
  }

  it('has a real-message case for every class', () => {
    for (const cls of PULL_CLASSES)
      assert.ok(
        CASES.some((c) => c.expected === cls),
        cls,
      );
    assert.ok(CASES.length >= 50);
  });

  it('matches case-insensitively', () => {
    assert.equal(classifyPullFailure('ErrImagePull', 'TOOMANYREQUESTS: slow down'), 'transient');
    assert.equal(classifyPullFailure('ErrImagePull', 'Unauthorized: Authentication Required'), 'auth');
    assert.equal(classifyPullFailure('ErrImagePull', 'MANIFEST UNKNOWN'), 'permanent');
    assert.equal(classifyPullFailure('ErrImagePull', 'MANIFEST_UNKNOWN: manifest unknown'), 'permanent');
  });

  it('does not read bare numbers as HTTP statuses', () => {
    assert.equal(classifyPullFailure('ErrImagePull', 'failed to copy: short read: expected 5000 bytes but got 503'), 'unknown');
    assert.equal(classifyPullFailure('ErrImagePull', 'unexpected status code 503'), 'transient');
    assert.equal(classifyPullFailure('ErrImagePull', 'StatusCode: 404'), 'permanent');
    assert.equal(classifyPullFailure('ErrImagePull', 'HTTP 429'), 'transient');
    assert.equal(classifyPullFailure('ErrImagePull', 'status: 403'), 'auth');
  });

  it('an image passed in is stripped even when unquoted and without a registry', () => {
    const message = 'reading manifest v1 in acme/unauthorized: manifest unknown';
    assert.equal(classifyPullFailure('ErrImagePull', message, 'acme/unauthorized:v1'), 'permanent');
  });

  it('every message rule is reachable (real messages plus a few single-cue ones)', () => {
    const used = new Set(CASES.map((c) => explainPullFailure(c.reason, c.message, c.image).decidedBy));
    const extra = [
      'image pull failed because the registry is unavailable',
      'authentication required',
      'insufficient_scope: authorization failed',
      'status: 403',
      'repository does not exist',
      // containers/image pkg/shortnames/shortnames.go (Resolve); more in classify-misread.test.ts
      'short-name resolution enforced but cannot prompt without a TTY',
    ];
    for (const m of extra) used.add(explainPullFailure('ErrImagePull', m).decidedBy);
    // The four families of classify-families.test.ts, each with its source.
    for (const f of FAMILY_FIXTURES)
      used.add(explainPullFailure(f.reason, f.message({ host: 'r.example', repo: 'a/b', object: ':1' })).decidedBy);
    const missing = PULL_CLASS_RULES.filter((r) => !used.has(r.cue)).map((r) => r.cue);
    assert.deepEqual(missing, []);
  });

  it('explain names the deciding rule and the effective reason', () => {
    assert.deepEqual(explainPullFailure('InvalidImageName', 'x'), {
      pullClass: 'permanent',
      decidedBy: 'reason InvalidImageName',
      reason: 'InvalidImageName',
      notFound: false,
    });
    const embedded = explainPullFailure('ImagePullBackOff', backOff('x', 'boom', 'RegistryUnavailable'));
    assert.equal(embedded.reason, 'RegistryUnavailable');
    assert.equal(embedded.decidedBy, 'reason RegistryUnavailable');
    assert.equal(explainPullFailure('ImagePullBackOff', 'Back-off pulling image "x"').decidedBy, 'default for ImagePullBackOff');
    assert.equal(explainPullFailure('SignatureValidationFailed', 'rejected').decidedBy, 'default for SignatureValidationFailed');
  });

  it('a signature failure with a network cause is transient', () => {
    const message =
      'image pull failed for quay.io/acme/app:1 because the signature validation failed: reading signature from https://quay.io/sigs/1: dial tcp 1.2.3.4:443: i/o timeout';
    assert.equal(classifyPullFailure('SignatureValidationFailed', message), 'transient');
  });
});

describe('unwrapBackOff', () => {
  it('splits the v1.32+ form into embedded reason and cause', () => {
    assert.deepEqual(unwrapBackOff('ImagePullBackOff', 'Back-off pulling image "nginx:1": ErrImagePull: pull QPS exceeded'), {
      reason: 'ErrImagePull',
      cause: 'pull QPS exceeded',
    });
  });
  it('keeps the reason when the cause has no embedded reason', () => {
    assert.deepEqual(unwrapBackOff('ImagePullBackOff', 'Back-off pulling image "nginx:1": something odd'), {
      reason: 'ImagePullBackOff',
      cause: 'something odd',
    });
  });
  it('a bare older back-off has an empty cause', () => {
    assert.deepEqual(unwrapBackOff('ImagePullBackOff', 'Back-off pulling image "nginx:1"'), { reason: 'ImagePullBackOff', cause: '' });
  });
  it('handles a cause that itself contains quotes and colons', () => {
    assert.deepEqual(unwrapBackOff('ImagePullBackOff', backOff(NOT_FOUND_IMAGE, CTRD_NOT_FOUND)), {
      reason: 'ErrImagePull',
      cause: CTRD_NOT_FOUND,
    });
  });
  it('leaves other messages alone', () => {
    assert.deepEqual(unwrapBackOff('ErrImagePull', CTRD_401), { reason: 'ErrImagePull', cause: CTRD_401 });
  });
});

describe('stripImageReferences', () => {
  it('removes quoted references, URLs and registry references', () => {
    const out = stripImageReferences(CTRD_401);
    assert.doesNotMatch(out, /pause:3\.10/);
    assert.match(out, /401 Unauthorized/);
  });
  it('keeps quoted phrases with spaces and upper-case error codes', () => {
    const out = stripImageReferences('{"code":"DENIED","message":"requested access to the resource is denied"}');
    assert.match(out, /"DENIED"/);
    assert.match(out, /requested access to the resource is denied/);
  });
  it('keeps cues that contain slashes', () => {
    assert.match(stripImageReferences('dial tcp 10.0.0.1:443: i/o timeout'), /i\/o timeout/);
    assert.match(stripImageReferences('net/http: request canceled'), /net\/http: request canceled/);
  });
  it('removes the image in its docker.io-normalised forms', () => {
    const out = stripImageReferences('in docker.io/library/denied: denied', 'denied');
    assert.doesNotMatch(out, /library/);
    assert.match(out, /: denied$/);
  });
});

describe('imageReferenceNames', () => {
  it('normalises Docker Hub short names and drops tags and digests', () => {
    assert.deepEqual(imageReferenceNames('nginx:1.27'), ['index.docker.io/library/nginx', 'docker.io/library/nginx', 'library/nginx']);
    assert.deepEqual(imageReferenceNames('acme/app@sha256:abcd'), ['index.docker.io/acme/app', 'docker.io/acme/app', 'acme/app']);
  });
  it('keeps a registry host with a port', () => {
    assert.deepEqual(imageReferenceNames('localhost:5000/app:1'), ['localhost:5000/app']);
    assert.deepEqual(imageReferenceNames('registry.example.com:5000/team/app'), ['registry.example.com:5000/team/app']);
  });
  it('is empty for an empty image', () => {
    assert.deepEqual(imageReferenceNames(''), []);
  });
});

describe('repositoryOf', () => {
  for (const [image, repo] of [
    ['nginx', 'docker.io/library/nginx'],
    ['nginx:1.27', 'docker.io/library/nginx'],
    ['docker.io/library/nginx@sha256:abcd', 'docker.io/library/nginx'],
    ['index.docker.io/acme/app:2', 'docker.io/acme/app'],
    ['acme/app', 'docker.io/acme/app'],
    ['Quay.io/acme/app:1', 'quay.io/acme/app'],
    ['localhost:5000/team/app:1', 'localhost:5000/team/app'],
    ['127.0.0.1:5001/team/app:fix-timeout', '127.0.0.1:5001/team/app'],
  ] as const) {
    it(`${image} -> ${repo}`, () => assert.equal(repositoryOf(image), repo));
  }
});

describe('describeClassification', () => {
  const rows = describeClassification();
  it('covers every class and every reason', () => {
    for (const cls of PULL_FAILURE_CLASSES)
      assert.ok(
        rows.some((r) => r.pullClass === cls),
        cls,
      );
    const text = rows.flatMap((r) => r.cues).join('\n');
    for (const reason of STUCK_REASONS) assert.match(text, new RegExp(`reason ${reason}\\b`), reason);
  });
  it('lists steps in evaluation order: reason, message (stalled, transient, node-side unknown, auth, permanent), default', () => {
    assert.deepEqual(
      rows.map((r) => `${r.step}:${r.pullClass}`),
      [
        'reason:permanent',
        'reason:transient',
        'message:stalled',
        'message:transient',
        'message:unknown',
        'message:auth',
        'message:permanent',
        'default:permanent',
        'default:unknown',
      ],
    );
  });

  it("matches docs/how-it-works.md's classification table, row by row (step and class)", () => {
    const readme = readFileSync(new URL('../../docs/how-it-works.md', import.meta.url), 'utf8');
    const start = readme.indexOf('### Classification (first match wins)');
    assert.ok(start >= 0);
    const table = readme.slice(start, readme.indexOf('\n#', start + 1));
    const readmeRows = [...table.matchAll(/^\| (reason|message|default) \| (\w+) \|/gm)].map((m) => `${m[1]}:${m[2]}`);
    assert.deepEqual(
      readmeRows,
      rows.map((r) => `${r.step}:${r.pullClass}`),
    );
  });
});

describe('explaining a failure that repeats', () => {
  const message = 'Back-off pulling image "registry.invalid/team/app:v1": ErrImagePull: manifest unknown';
  it('answers the same failure with the same frozen answer, which a caller cannot change for the next', () => {
    const first = explainPullFailure('ImagePullBackOff', message, 'registry.invalid/team/app:v1');
    assert.equal(explainPullFailure('ImagePullBackOff', message, 'registry.invalid/team/app:v1'), first);
    assert.ok(Object.isFrozen(first));
    assert.equal(first.pullClass, 'permanent');
  });

  it('tells apart failures that differ only in the image or the reason', () => {
    const named = explainPullFailure('ErrImagePull', 'failed to pull image: pull access denied for acme/denied-404', 'acme/denied-404');
    const unnamed = explainPullFailure('ErrImagePull', 'failed to pull image: pull access denied for acme/denied-404');
    assert.notEqual(named, unnamed);
    const never = 'Container image "acme/app:v1" is not present with pull policy of Never';
    assert.equal(explainPullFailure('ErrImagePull', never).reason, 'ErrImagePull');
    assert.equal(explainPullFailure('ErrImageNeverPull', never).reason, 'ErrImageNeverPull');
  });

  it('keeps answering right past the number of answers it keeps', () => {
    for (let i = 0; i < 1_200; i++) {
      const text = i % 2 ? `rpc error: i/o timeout ${i}` : `rpc error: code = NotFound desc = manifest for x/y:${i} not found`;
      assert.equal(explainPullFailure('ErrImagePull', text).pullClass, i % 2 ? 'transient' : 'permanent', text);
    }
  });
});
