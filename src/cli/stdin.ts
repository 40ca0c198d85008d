import { MAX_POLICY_BYTES } from '../policy/parse.ts';

/** Stdin up to one byte more than MAX_POLICY_BYTES (the rest is not kept), so too large still shows. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of process.stdin) {
    if (length > MAX_POLICY_BYTES) continue;
    chunks.push(chunk as Buffer);
    length += (chunk as Buffer).length;
  }
  return Buffer.concat(chunks)
    .subarray(0, MAX_POLICY_BYTES + 1)
    .toString('utf8');
}
