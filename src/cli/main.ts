#!/usr/bin/env node
import { runCli } from './program.ts';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  readStdin,
  onStopSignal: (stop) => {
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  },
});
process.exitCode = code;
