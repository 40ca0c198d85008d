// The Events the sweeper writes, and the passed deadline it sets.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { passedDeadlineSeconds } from '../../src/act/claim.ts';
import { stuckJobEvent } from '../../src/act/events.ts';
import { truncate } from '../../src/text.ts';
import { formatClaimMessage as describeStuck } from '../../src/judge/claim-message.ts';
import { NOW, job, secondsAgo } from './judge-fixtures.ts';
import { decisionFor } from './report-fixtures.ts';

describe('events', () => {
  it('build an events.k8s.io/v1 Warning regarding the Job, related to the pod', () => {
    const d = decisionFor('build');
    const e = stuckJobEvent(d, 'FailJob', { instance: 'host-1', now: NOW });
    assert.equal(e.type, 'Warning');
    assert.equal(e.reason, 'ImagePullStuck');
    assert.equal(e.action, 'FailJob');
    assert.equal(e.reportingController, 'imagepull-sweeper');
    assert.equal(e.regarding?.kind, 'Job');
    assert.equal(e.regarding?.uid, 'uid-build');
    assert.equal(e.related?.kind, 'Pod');
    assert.equal(e.metadata?.namespace, 'ci-a');
    assert.equal(e.eventTime.toISOString(), '2026-11-29T12:00:00.000000Z');
    assert.ok(Buffer.byteLength(e.note ?? '') <= 1024);
  });

  it('keep the note within 1024 bytes even for long multibyte messages', () => {
    const d = { ...decisionFor('build'), message: 'é'.repeat(5000) };
    assert.ok(Buffer.byteLength(stuckJobEvent(d, 'Report', { instance: 'h', now: NOW }).note!) <= 1024);
    assert.equal(truncate('short', 10), 'short');
  });

  it('describe container, image, class, time stuck, rule and the kubelet message', () => {
    const text = describeStuck(decisionFor('build'));
    assert.match(text, /container main/);
    assert.match(text, /registry\.example\/app:missing/);
    assert.match(text, /class permanent/);
    assert.match(text, /5m12s/);
    assert.match(text, /rule defaults, grace 2m from defaults\)/);
    assert.match(text, /Back-off pulling image/);
    const annotated = decisionFor('pinned', { annotations: { 'imagepull-sweeper/grace': '1m' } });
    assert.match(describeStuck(annotated), /grace 1m from annotation\)/);
    const e = stuckJobEvent(annotated, 'FailJob', { instance: 'h', now: NOW });
    assert.match(e.note!, /grace 1m from annotation\)/);
  });
});

describe('activeDeadlineSeconds', () => {
  it('is already passed, counted from the Job start', () => {
    assert.equal(passedDeadlineSeconds(job('a', { startTime: secondsAgo(3600.7) }), NOW), 3600);
    assert.equal(passedDeadlineSeconds(job('a', { startTime: secondsAgo(0.2) }), NOW), 1);
    assert.equal(passedDeadlineSeconds(job('a', { startTime: undefined }), NOW), 1);
  });
});
