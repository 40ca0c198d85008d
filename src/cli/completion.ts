// `completion bash|zsh|fish`: a completion script written from the command tree itself, so a new
// command or option completes without touching this file.
import type { Command, Option } from 'commander';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

/** The names a user types: the command and its kubectl plugin. */
const NAMES = ['imagepull-sweeper', 'kubectl-imagepull_sweeper'];
/** Options whose value is a file: the shell completes paths for them. */
const FILE_OPTIONS = new Set(['--kubeconfig', '--policy-file']);

interface Node {
  /** Subcommand names from the root, e.g. `['policy', 'explain']`. */
  path: string[];
  command: Command;
}

function walk(command: Command, path: string[] = []): Node[] {
  return [{ path, command }, ...command.commands.flatMap((c) => walk(c, [...path, c.name()]))];
}

const flags = (o: Option): string[] => [o.short, o.long].filter((f): f is string => Boolean(f));
const takesValue = (o: Option): boolean => o.required || o.optional;
/** The values a command's arguments take, e.g. the shells of `completion`. */
const choices = (c: Command): string[] => c.registeredArguments.flatMap((a) => a.argChoices ?? []);

function bash(root: Command): string {
  const nodes = walk(root);
  const words = nodes.map(({ path, command }) => {
    const all = [...command.commands.map((c) => c.name()), ...choices(command), ...command.options.flatMap(flags), '--help'];
    return `    "${path.join(' ')}") words="${all.join(' ')}" ;;`;
  });
  const values = nodes
    .flatMap(({ command }) => command.options)
    .filter(takesValue)
    .map((o) => {
      const answer = FILE_OPTIONS.has(o.long ?? '')
        ? 'COMPREPLY=($(compgen -f -- "$cur"))'
        : o.argChoices
          ? `COMPREPLY=($(compgen -W "${o.argChoices.join(' ')}" -- "$cur"))`
          : 'COMPREPLY=()';
      // An optional value: an option may follow instead.
      return o.optional
        ? `    ${flags(o).join('|')}) [[ $cur == -* ]] || { ${answer}; return; } ;;`
        : `    ${flags(o).join('|')}) ${answer}; return ;;`;
    });
  const paths = nodes.filter((n) => n.path.length > 0).map((n) => `"${n.path.join(' ')}"`);
  return `# ${root.name()} completion for bash: source <(${root.name()} completion bash)
_imagepull_sweeper() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} path="" words i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${path:+$path }\${COMP_WORDS[i]}" in
      ${paths.join('|')}) path="\${path:+$path }\${COMP_WORDS[i]}" ;;
    esac
  done
  case "$prev" in
${[...new Set(values)].join('\n')}
  esac
  case "$path" in
${words.join('\n')}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _imagepull_sweeper ${NAMES.join(' ')}
`;
}

function zsh(root: Command): string {
  return `#compdef ${NAMES.join(' ')}
# ${root.name()} completion for zsh: source <(${root.name()} completion zsh)
autoload -U +X bashcompinit && bashcompinit
${bash(root)
  .split('\n')
  .filter((l) => !l.startsWith('#'))
  .join('\n')}`;
}

const quote = (s: string): string => `'${s.replace(/'/g, "\\'")}'`;

function fish(root: Command): string {
  const lines = [`# ${root.name()} completion for fish: ${root.name()} completion fish | source`];
  for (const name of NAMES) {
    lines.push(`complete -c ${name} -f`);
    for (const { path, command } of walk(root)) {
      const here = path.length === 0 ? '__fish_use_subcommand' : `__fish_seen_subcommand_from ${path.at(-1)}`;
      const children = command.commands.map((c) => c.name());
      const notDeeper = children.length > 0 && path.length > 0 ? `; and not __fish_seen_subcommand_from ${children.join(' ')}` : '';
      for (const child of command.commands)
        lines.push(`complete -c ${name} -n ${quote(here + notDeeper)} -a ${child.name()} -d ${quote(child.description())}`);
      if (choices(command).length > 0) lines.push(`complete -c ${name} -n ${quote(here)} -a ${quote(choices(command).join(' '))}`);
      for (const o of command.options) {
        const parts = [`complete -c ${name} -n ${quote(here)}`];
        if (o.short) parts.push(`-s ${o.short.slice(1)}`);
        if (o.long) parts.push(`-l ${o.long.slice(2)}`);
        // fish has no optional values: `--dry-run` completes as a plain flag.
        if (o.required)
          parts.push(FILE_OPTIONS.has(o.long ?? '') ? '-r -F' : o.argChoices ? `-x -a ${quote(o.argChoices.join(' '))}` : '-x');
        parts.push(`-d ${quote(o.description)}`);
        lines.push(parts.join(' '));
      }
    }
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(shell: Shell, root: Command): string {
  return { bash, zsh, fish }[shell](root);
}
