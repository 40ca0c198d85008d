// Failure cases only CRI-O's configuration can produce, on the real CRI-O node: a short name that
// resolves nowhere (its registries.conf has no unqualified-search registries), an image its
// signature policy requires to be signed (CRI-O's per-namespace policy file, a sigstore key), and
// an OCI image index with no entry for the node's platform. prepareCrioCases() pushes the images
// and writes the namespace's policy; crioCases() are the pods.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NodeCase } from './node-cases.ts';
import { nodePodSpec } from './node-cases.ts';
import type { TestNodeHandle } from './node.ts';
import { crioPolicyDir } from './runtime-crio.ts';

const SIGNED_REPO = 'team/signed';
const INDEX_REPO = 'team/arm-only';

/**
 * Pushes an OCI image index whose only entry is the pause image's manifest labelled linux/arm64/v8
 * (the registry keeps both in `repo`): what buildx, ko or a CI pushes for an arm-only image.
 */
async function pushArmOnlyIndex(node: TestNodeHandle, repo: string, tag: string): Promise<void> {
  await node.pushImage(`${repo}:amd64-base`);
  const base = `http://${node.registry}/v2/${repo}/manifests`;
  const res = await fetch(`${base}/amd64-base`, { headers: { Accept: 'application/vnd.oci.image.manifest.v1+json' } });
  if (!res.ok) throw new Error(`GET ${base}/amd64-base: ${res.status}`);
  const body = Buffer.from(await res.arrayBuffer());
  const index = {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [
      {
        mediaType: res.headers.get('content-type'),
        digest: res.headers.get('docker-content-digest'),
        size: body.length,
        platform: { architecture: 'arm64', os: 'linux', variant: 'v8' },
      },
    ],
  };
  const put = await fetch(`${base}/${tag}`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/vnd.oci.image.index.v1+json' },
    body: JSON.stringify(index),
  });
  if (put.status !== 201) throw new Error(`PUT ${base}/${tag}: ${put.status} ${await put.text()}`);
}

/**
 * Pushes the images and writes `namespace`'s signature policy (CRI-O reads
 * `<signature_policy_dir>/<namespace>.json` for that namespace's pulls): anything goes, except
 * SIGNED_REPO, which must carry a sigstore signature by a fresh key (it carries none).
 */
export async function prepareCrioCases(node: TestNodeHandle, namespace: string): Promise<void> {
  const dir = crioPolicyDir(node.criSocket);
  const key = path.join(dir, `${namespace}.key`);
  const pub = path.join(dir, `${namespace}.pub`);
  execFileSync('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  execFileSync('openssl', ['ec', '-in', key, '-pubout', '-out', pub], { stdio: 'ignore' });
  const policy = {
    default: [{ type: 'insecureAcceptAnything' }],
    transports: {
      docker: {
        [`${node.registry}/${SIGNED_REPO}`]: [{ type: 'sigstoreSigned', keyPath: pub, signedIdentity: { type: 'matchRepository' } }],
      },
    },
  };
  fs.writeFileSync(path.join(dir, `${namespace}.json`), JSON.stringify(policy, null, 2));
  await node.pushImage(`${SIGNED_REPO}:1`);
  await pushArmOnlyIndex(node, INDEX_REPO, '1');
}

/** The CRI-O-only cases (run prepareCrioCases first, in the same namespace). */
export function crioCases(node: TestNodeHandle): NodeCase[] {
  const regular = (id: string, title: string, image: string, reasons: string[]): NodeCase => ({
    id,
    title,
    expectedClass: 'permanent',
    container: 'main',
    containerKind: 'regular',
    reasons,
    image,
    spec: nodePodSpec(node, [{ name: 'main', image }]),
  });
  return [
    regular('short-name', 'short name, no unqualified-search registries', 'app:1', ['ImageInspectError']),
    regular('signature-required', 'signature policy requires a signature the image lacks', `${node.registry}/${SIGNED_REPO}:1`, [
      'SignatureValidationFailed',
      'ImagePullBackOff',
    ]),
    regular('platform-mismatch', 'OCI image index without the node platform', `${node.registry}/${INDEX_REPO}:1`, [
      'ErrImagePull',
      'ImagePullBackOff',
    ]),
  ];
}
