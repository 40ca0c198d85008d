#!/usr/bin/env node
import { runCli } from './program.ts';
import { readStdin } from './stdin.ts';

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
