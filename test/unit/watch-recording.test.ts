// The watch's recording gateway (src/watch/recording-gateway.ts) over a server dry run's variant:
// its writes are noted and its policy read is replayed, as over the live gateway.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { recordingWrites } from '../../src/watch/recording-gateway.ts';
import { scriptedGateway } from '../support/scripted-gateway.ts';

describe('the recording gateway of a watch-triggered sweep', () => {
  it("records the server-dry-run variant's writes and policy read", async () => {
    const configMap = { metadata: { name: 'policy' }, data: { 'policy.yaml': '{}\n' } };
    const scripted = scriptedGateway({ readConfigMap: [configMap] });
    const writes = recordingWrites(scripted.gateway, () => 42);
    const variant = writes.gateway.serverDryRun();
    await variant.readConfigMap('ops', 'policy');
    await variant.mergePatchJob('ci', 'a', {});
    assert.deepEqual(scripted.methods(), ['serverDryRun', 'readConfigMap', 'mergePatchJob']);
    assert.equal(writes.firstWrite('ci', 'a'), 42);
    assert.deepEqual(await writes.replayingPolicy().readConfigMap('ops', 'policy'), configMap);
    assert.equal(scripted.count('readConfigMap'), 1, 'replayed, not read again');
  });
});
