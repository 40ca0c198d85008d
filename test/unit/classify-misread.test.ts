// Two families of real messages whose words once misled the classifier: a node-side "Access is
// denied" from a Windows layer store (not an auth failure), and CRI-O's enforcing short-name mode
// ("returns ambiguous list", permanent). Sources are named per message; docs/classification.md.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainPullFailure } from '../../src/classify/index.ts';
import type { PullClass, StuckReason } from '../../src/model.ts';

interface Case {
  name: string;
  /** Where the text comes from (upstream file and version, or a report quoting the runtime). */
  source: string;
  reason: StuckReason;
  message: string;
  image?: string;
  expected: PullClass;
}

// hcsshim internal/wclayer/processimage.go: os.PathError{Op: "hcsshim::ProcessBaseLayer"} around the
// Win32 text; containerd core/unpack/unpacker.go: "failed to extract layer %s"; containerd
// internal/cri/server/images/image_pull.go: "failed to pull and unpack image %q: %w". The path and
// digest are those microsoft/hcsshim#2380 quotes from containerd on Windows 11.
const HCS_DENIED =
  'failed to extract layer sha256:bc06b22070cd8fb7c81b24025f0d67ed17390339fd8506cc46ce0224ec9c6e73: hcsshim::ProcessBaseLayer ' +
  '\\\\?\\C:\\ProgramData\\containerd\\root\\io.containerd.snapshotter.v1.windows\\snapshots\\1: Access is denied.';

// cri-o internal/storage/image.go (CandidatesForPotentiallyShortImageName), v1.30+: the text it
// puts in place of containers/image pkg/shortnames/shortnames.go's "short-name resolution enforced
// but cannot prompt without a TTY"; the kubelet (pkg/kubelet/images/image_manager.go v1.37.2,
// imagePullPrecheck) wraps it as `Failed to inspect image %q: %v` with an empty imageRef.
const AMBIGUOUS = (name: string) => `short name mode is enforcing, but image name ${name} returns ambiguous list`;

const CASES: Case[] = [
  {
    name: 'containerd on Windows: the layer store refused the unpack (Access is denied)',
    source: 'microsoft/hcsshim#2380; hcsshim internal/wclayer/processimage.go; containerd core/unpack/unpacker.go',
    reason: 'ErrImagePull',
    message: `rpc error: code = Unknown desc = failed to pull and unpack image "mcr.microsoft.com/windows/nanoserver:ltsc2022": ${HCS_DENIED}`,
    image: 'mcr.microsoft.com/windows/nanoserver:ltsc2022',
    expected: 'unknown',
  },
  {
    name: 'the same after a back-off (kubelet v1.32+ form)',
    source: 'kubernetes pkg/kubelet/images/image_manager.go v1.37.2 (pullImage back-off); as above',
    reason: 'ImagePullBackOff',
    message:
      'Back-off pulling image "mcr.microsoft.com/windows/nanoserver:ltsc2022": ErrImagePull: rpc error: code = Unknown desc = ' +
      `failed to pull and unpack image "mcr.microsoft.com/windows/nanoserver:ltsc2022": ${HCS_DENIED}`,
    image: 'mcr.microsoft.com/windows/nanoserver:ltsc2022',
    expected: 'unknown',
  },
  {
    name: 'Docker Engine on Windows through cri-dockerd: failed to register layer ... Access is denied',
    source: 'docker/for-win#2807 (moby layer store on windowsfilter)',
    reason: 'ErrImagePull',
    message:
      'failed to register layer: re-exec error: exit status 1: output: ProcessBaseLayer \\\\?\\C:\\ProgramData\\Docker\\windowsfilter\\' +
      '546bb84ba5e539ee2e87a1a25a50e13385b068ee7b641999b691fc6672897250: Access is denied.',
    expected: 'unknown',
  },
  {
    name: "a registry's own denial stays auth (its words never read 'access is denied')",
    source: 'moby distribution/errors.go (TranslatePullError)',
    reason: 'ErrImagePull',
    message:
      "Error response from daemon: pull access denied for acme/private, repository does not exist or may require 'docker login': " +
      'denied: requested access to the resource is denied',
    expected: 'auth',
  },
  {
    name: 'CRI-O enforcing short-name mode, seen on the image status check (ImageInspectError)',
    source: 'cri-o internal/storage/image.go; kubernetes pkg/kubelet/images/image_manager.go v1.37.2 (imagePullPrecheck)',
    reason: 'ImageInspectError',
    message: `Failed to inspect image "": rpc error: code = Unknown desc = ${AMBIGUOUS('redis:7.0.13')}`,
    image: 'redis:7.0.13',
    expected: 'permanent',
  },
  {
    name: 'CRI-O enforcing short-name mode on a pull (pull policy Always: ErrImagePull)',
    source: 'cri-o internal/storage/image.go (the same text through PullImage)',
    reason: 'ErrImagePull',
    message: AMBIGUOUS('curlimages/curl:8.14.1'),
    image: 'curlimages/curl:8.14.1',
    expected: 'permanent',
  },
  {
    name: 'the ambiguous short name decides, not the cue words in it (unquoted in the message)',
    source: 'cri-o internal/storage/image.go',
    reason: 'ImageInspectError',
    message: `Failed to inspect image "": rpc error: code = Unknown desc = ${AMBIGUOUS('acme/timeout-denied:1')}`,
    expected: 'permanent',
  },
  {
    name: 'containers/image wording where CRI-O does not rewrite it',
    source: 'containers/image pkg/shortnames/shortnames.go (Resolve)',
    reason: 'ErrImagePull',
    message: 'short-name resolution enforced but cannot prompt without a TTY',
    expected: 'permanent',
  },
];

describe('messages whose words misled the classifier', () => {
  for (const c of CASES) {
    it(`${c.name} -> ${c.expected}`, () => {
      assert.ok(c.source.length > 0);
      assert.equal(explainPullFailure(c.reason, c.message, c.image).pullClass, c.expected, c.message);
    });
  }

  it('says which rule decided a node-side denial', () => {
    const why = explainPullFailure('ErrImagePull', CASES[0]!.message, CASES[0]!.image).decidedBy;
    assert.match(why, /layer store/);
  });
});
