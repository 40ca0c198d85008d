import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judgeWriteError, tryWrite } from '../../src/kube/write-outcome.ts';
import { apiError, lostAnswer } from '../support/scripted-gateway.ts';

const verdict = (o: ReturnType<typeof judgeWriteError>) => (o.landed ? (o.already ? 'already' : 'landed') : o.why);

describe('did this write land', () => {
  it('judges an error answer by the kind of write', () => {
    assert.equal(verdict(judgeWriteError('create', apiError(409, 'AlreadyExists', 'x'))), 'already');
    assert.equal(verdict(judgeWriteError('delete', apiError(404, 'NotFound', 'x'))), 'already');
    assert.equal(verdict(judgeWriteError('update', apiError(404, 'NotFound', 'x'))), 'gone');
    assert.equal(verdict(judgeWriteError('create', apiError(404, 'NotFound', 'namespace gone'))), 'gone');
    assert.equal(verdict(judgeWriteError('update', apiError(409, 'Conflict', 'x'))), 'conflict');
    assert.equal(verdict(judgeWriteError('delete', apiError(409, 'Conflict', 'precondition'))), 'conflict');
    assert.equal(verdict(judgeWriteError('update', apiError(403, 'Forbidden', 'x'))), 'failed');
    assert.equal(verdict(judgeWriteError('update', lostAnswer())), 'failed');
  });

  it('reads back a write whose answer was lost; a conflict only when asked', async () => {
    const reads: string[] = [];
    const confirm = async () => (reads.push('read'), true);
    assert.equal((await tryWrite('update', () => Promise.reject(lostAnswer()), confirm)).landed, true);
    assert.equal((await tryWrite('update', () => Promise.reject(apiError(409, 'Conflict', 'x')), confirm)).landed, false);
    assert.equal(
      (await tryWrite('update', () => Promise.reject(apiError(409, 'Conflict', 'x')), confirm, { confirmConflicts: true })).landed,
      true,
    );
    assert.equal(
      (await tryWrite('update', () => Promise.reject(apiError(404, 'NotFound', 'x')), confirm, { confirmConflicts: true })).landed,
      false,
    );
    assert.deepEqual(reads, ['read', 'read']);
    const unreadable = await tryWrite(
      'update',
      () => Promise.reject(lostAnswer()),
      () => Promise.reject(lostAnswer()),
    );
    assert.deepEqual([unreadable.landed, unreadable.failure?.reason], [false, 'ECONNRESET']);
  });
});
