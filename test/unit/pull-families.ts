// Messages of four families of pull failures, each with where it comes from: the runtime's source
// (file, version) or a public report of it, or the real test node (test/e2e/node-pull-refused.test.ts
// proves those forms there). `n` names the image so that a test can fill in names made of cue words.
import type { PullClass, StuckReason } from '../../src/model.ts';

export interface FamilyNames {
  host: string;
  repo: string;
  /** `:tag` or `@sha256:…`. */
  object: string;
}

export interface FamilyFixture {
  family: 'oci-artifact' | 'blocked-registry' | 'schema-1' | 'windows-socket';
  source: string;
  reason: StuckReason;
  expected: PullClass;
  message: (n: FamilyNames) => string;
}

const ref = (n: FamilyNames): string => `${n.host}/${n.repo}${n.object}`;
const repository = (n: FamilyNames): string => `${n.host}/${n.repo}`;
const tagOrDigest = (n: FamilyNames): string => n.object.slice(1);
const hostname = (n: FamilyNames): string => n.host.replace(/:\d+$/, '');
/** Docker prints fully qualified names in these messages (reference.FamiliarString is not used). */
const DIGEST = 'sha256:4486102fd3820ed9527fa3e7bfefa8305c2f054e65b46dffe9675755e3d8f288';

export const FAMILY_FIXTURES: FamilyFixture[] = [
  // An OCI artifact that is not a container image.
  {
    family: 'oci-artifact',
    source:
      'containers/image internal/manifest/errors.go (NonImageArtifactError), podman/CRI-O "parsing image configuration", public report confidential-containers/trustee#1561',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `initializing source docker://${ref(n)}: parsing image configuration: unsupported image-specific operation on artifact with type "application/vnd.unknown.config.v1+json"`,
  },
  {
    family: 'oci-artifact',
    source:
      'containers/image internal/manifest/errors.go: an artifact typed by artifactType (an AI model, as podman reports docker.io/ai/* models)',
    reason: 'ImagePullBackOff',
    expected: 'permanent',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": ErrImagePull: parsing image configuration: unsupported image-specific operation on artifact with type "application/vnd.cncf.model.manifest.v1+json"`,
  },
  {
    family: 'oci-artifact',
    source: 'containers/image internal/manifest/errors.go: an OCI manifest with a Docker v2s2 config',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `initializing source docker://${ref(n)}: parsing image configuration: invalid mixed OCI image with Docker v2s2 config ("application/vnd.docker.container.image.v1+json")`,
  },
  {
    family: 'oci-artifact',
    source:
      'containerd 1.6.20 on the test node (node-pull-refused.test.ts: a Helm chart and a model artifact), image.go (Unpack: the config has no rootfs diff_ids for the layers); containerd before 1.6.25/1.7.7',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `failed to pull and unpack image "${ref(n)}": failed to unpack image on snapshotter overlayfs: mismatched image rootfs and manifest layers`,
  },
  {
    family: 'oci-artifact',
    source: 'containerd 1.6.20 on the test node, under the kubelet v1.32+ back-off',
    reason: 'ImagePullBackOff',
    expected: 'permanent',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": ErrImagePull: failed to pull and unpack image "${ref(n)}": failed to unpack image on snapshotter overlayfs: ` +
      'mismatched image rootfs and manifest layers',
  },
  {
    family: 'oci-artifact',
    source: 'moby distribution/pull_v2.go (unsupportedMediaTypeError, moby/moby#44367) through cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: () => 'Error response from daemon: unsupported media type application/vnd.cncf.helm.config.v1+json',
  },
  // A registry the node's configuration blocks.
  {
    family: 'blocked-registry',
    source:
      'containers/image docker/docker_client.go (newDockerClient: "registry %s is blocked in %s or %s") under CRI-O, public report openshift/installer#10073',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `unable to pull image or OCI artifact: pull image err: initializing source docker://${ref(n)}: registry ${repository(n)} is blocked in ` +
      '/etc/containers/registries.conf or /etc/containers/registries.conf.d',
  },
  {
    family: 'blocked-registry',
    source:
      'CRI-O 1.34.0 on the test node (node-pull-refused.test.ts: registries.conf `blocked = true` on a prefix), containers/image docker/docker_client.go under internal/ociartifact',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `unable to try pulling possible OCI artifact: build image source: registry ${repository(n)} is blocked in /etc/crio/registries.conf or /etc/containers/registries.conf.d`,
  },
  {
    family: 'blocked-registry',
    source: 'containers/image docker/docker_client.go: a whole registry host blocked (prefix = host)',
    reason: 'ImagePullBackOff',
    expected: 'permanent',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": ErrImagePull: initializing source docker://${ref(n)}: registry ${n.host} is blocked in ` +
      '/etc/containers/registries.conf or /etc/containers/registries.conf.d',
  },
  {
    family: 'blocked-registry',
    source:
      'containers/image signature/policy_eval_simple.go (prReject: "Running image %s is rejected by policy."; OpenShift allowedRegistries write it), text asserted in skopeo integration/signing_test.go; CRI-O reports it through the kubelet as SignatureValidationFailed',
    reason: 'SignatureValidationFailed',
    expected: 'permanent',
    message: (n) =>
      `image pull failed for ${ref(n)} because the signature validation failed: Source image rejected: Running image docker://${ref(n)} is rejected by policy.`,
  },
  {
    family: 'blocked-registry',
    source: 'containers/image signature/policy_eval_simple.go (prReject) reported as a plain pull error',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) => `Source image rejected: Running image docker://${ref(n)} is rejected by policy.`,
  },
  // Docker schema 1 manifests refused.
  {
    family: 'schema-1',
    source:
      'containerd 2.4.2 on the test node (node-pull-refused.test.ts), core/transfer/local/pull.go (transfer service: "schema 1 image manifests are no longer supported: %w", errdefs.ErrInvalidArgument): what the CRI of containerd 2.1+ says through its transfer service, on Linux and on Windows',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `rpc error: code = InvalidArgument desc = failed to pull and unpack image "${ref(n)}": schema 1 image manifests are no longer supported: invalid argument`,
  },
  {
    family: 'schema-1',
    source: 'containerd 2.x core/transfer/local/pull.go under the kubelet v1.32+ back-off',
    reason: 'ImagePullBackOff',
    expected: 'permanent',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": ErrImagePull: rpc error: code = InvalidArgument desc = failed to pull and unpack image "${ref(n)}": ` +
      'schema 1 image manifests are no longer supported: invalid argument',
  },
  {
    family: 'schema-1',
    source:
      'moby distribution (DeprecatedSchema1ImageError, Docker Engine 28.3+ after moby/moby#42300; quoted in moby/moby#50183) through cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      `Error response from daemon: Docker Image Format v1 and Docker Image manifest version 2, schema 1 support has been removed. Suggest the author of ${ref(n)} ` +
      'to upgrade the image to the OCI Format or Docker Image manifest v2, schema 2. More information at https://docs.docker.com/go/deprecated-image-specs/',
  },
  {
    family: 'schema-1',
    source: 'moby distribution (Docker Engine 26.0–28.2, disabled by default; docker/cli#4938 docs/deprecated.md) through cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: (n) =>
      '[DEPRECATION NOTICE] Docker Image Format v1 and Docker Image manifest version 2, schema 1 support is disabled by default and will be removed in an upcoming release. ' +
      `Suggest the author of ${ref(n)} to upgrade the image to the OCI Format or Docker Image manifest v2, schema 2. More information at https://docs.docker.com/go/deprecated-image-specs/`,
  },
  {
    family: 'schema-1',
    source: 'moby with the containerd image store (moby/moby#44521)',
    reason: 'ErrImagePull',
    expected: 'permanent',
    message: () => 'Error response from daemon: application/vnd.docker.distribution.manifest.v1+prettyjws not supported',
  },
  // Windows socket errors (Go's net on Windows names the Winsock call).
  {
    family: 'windows-socket',
    source: 'Go net on Windows (wsarecv), a registry read reset: public report moby/moby#28110, microsoft/containerregistry#6',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `failed to pull and unpack image "${ref(n)}": failed to resolve reference "${ref(n)}": failed to do request: ` +
      `Head "https://${n.host}/v2/${n.repo}/manifests/${tagOrDigest(n)}": read tcp 10.240.0.4:49858->52.5.234.85:443: wsarecv: An existing connection was forcibly closed by the remote host.`,
  },
  {
    family: 'windows-socket',
    source: 'Go net on Windows (wsasend), a write reset: public report HyNetworks/hysteria#697; containerd fetcher.go wording',
    reason: 'ImagePullBackOff',
    expected: 'transient',
    message: (n) =>
      `Back-off pulling image "${ref(n)}": ErrImagePull: failed to pull and unpack image "${ref(n)}": failed to copy: httpReadSeeker: failed open: ` +
      `failed to do request: Get "https://${n.host}/v2/${n.repo}/blobs/${DIGEST}": write tcp 10.240.0.4:50112->52.5.234.85:443: wsasend: An existing connection was forcibly closed by the remote host.`,
  },
  {
    family: 'windows-socket',
    source: 'containerd on Windows (connectex, did not properly respond): public report containerd/containerd#7676',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `failed to pull and unpack image "${ref(n)}": failed to copy: httpReadSeeker: failed open: failed to do request: ` +
      `Get "https://${n.host}/v2/${n.repo}/blobs/${DIGEST}": dial tcp 204.79.197.219:443: connectex: A connection attempt failed because the connected party ` +
      'did not properly respond after a period of time, or established connection failed because connected host has failed to respond.',
  },
  {
    family: 'windows-socket',
    source: 'Docker on Windows (connectex, actively refused): public report moby/moby#37127, through cri-dockerd',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `Error response from daemon: Get "https://${hostname(n)}/v2/": dial tcp 35.169.231.249:443: connectex: No connection could be made because the target machine actively refused it.`,
  },
  {
    family: 'windows-socket',
    source: 'Docker Desktop on Windows through its proxy (connectex, actively refused): public report docker/for-win#13994',
    reason: 'ErrImagePull',
    expected: 'transient',
    message: (n) =>
      `Error response from daemon: Get "https://${hostname(n)}/v2/": writing response to ${hostname(n)}:443: connecting to 127.0.0.1:1081: ` +
      'dial tcp 127.0.0.1:1081: connectex: No connection could be made because the target machine actively refused it.',
  },
];
