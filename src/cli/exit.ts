// The exit statuses live beside the sweep's status (src/exit.ts); the commands import them here.
export { EXIT, exitStatusOf } from '../exit.ts';
