// Namespace-name globs: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`, anchored at both ends.

const NAME_CHAR = /^[a-z0-9-]$/;
const MAX_NAME_LENGTH = 63;

export type GlobParse = { ok: true; regex: RegExp } | { ok: false; error: string };

function neverMatches(ch: string, glob: string): string {
  const why = /[A-Z]/.test(ch) ? 'namespace names are lowercase' : 'namespace names contain only a-z, 0-9 and "-"';
  return `glob ${JSON.stringify(glob)} can never match: ${JSON.stringify(ch)} is not allowed (${why})`;
}

/** Validates and compiles a namespace glob. */
export function parseNamespaceGlob(glob: string): GlobParse {
  const fail = (error: string): GlobParse => ({ ok: false, error });
  if (glob === '') return fail('glob is empty');
  const chars = [...glob];
  let source = '';
  let minLength = 0;
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i]!;
    if (ch === '*') {
      source += '.*';
    } else if (ch === '?') {
      source += '.';
      minLength++;
    } else if (ch === '[') {
      const cls = parseClass(chars, i, glob);
      if (!cls.ok) return fail(cls.error);
      source += cls.source;
      minLength++;
      i = cls.end;
    } else if (ch === ']') {
      return fail(`glob ${JSON.stringify(glob)} has "]" without a matching "[" (at position ${i + 1})`);
    } else if (NAME_CHAR.test(ch)) {
      if (ch === '-' && (i === 0 || i === chars.length - 1)) {
        return fail(`glob ${JSON.stringify(glob)} can never match: namespace names cannot start or end with "-"`);
      }
      source += ch;
      minLength++;
    } else {
      return fail(neverMatches(ch, glob));
    }
  }
  if (minLength > MAX_NAME_LENGTH) {
    return fail(`glob ${JSON.stringify(glob)} can never match: namespace names have at most ${MAX_NAME_LENGTH} characters`);
  }
  return { ok: true, regex: new RegExp(`^${source}$`) };
}

function parseClass(chars: string[], open: number, glob: string): { ok: true; source: string; end: number } | { ok: false; error: string } {
  let i = open + 1;
  const negate = chars[i] === '!';
  if (negate) i++;
  const members: string[] = [];
  for (; i < chars.length && chars[i] !== ']'; i++) {
    const ch = chars[i]!;
    if (!NAME_CHAR.test(ch)) {
      return ch === '['
        ? { ok: false, error: `glob ${JSON.stringify(glob)} has "[" inside a character class (at position ${i + 1})` }
        : { ok: false, error: neverMatches(ch, glob) };
    }
    const to = chars[i + 2];
    if (chars[i + 1] === '-' && to !== undefined && to !== ']') {
      if (!NAME_CHAR.test(to)) return { ok: false, error: neverMatches(to, glob) };
      if (to < ch) return { ok: false, error: `glob ${JSON.stringify(glob)} has a reversed range "${ch}-${to}"` };
      members.push(`${esc(ch)}-${esc(to)}`);
      i += 2;
    } else {
      members.push(esc(ch));
    }
  }
  if (i >= chars.length) {
    return { ok: false, error: `glob ${JSON.stringify(glob)} has an unclosed "[" (at position ${open + 1})` };
  }
  if (members.length === 0) {
    return { ok: false, error: `glob ${JSON.stringify(glob)} has an empty character class (at position ${open + 1})` };
  }
  return { ok: true, source: `[${negate ? '^' : ''}${members.join('')}]`, end: i };
}

function esc(ch: string): string {
  return ch === '-' ? '\\-' : ch;
}

/** Error message for an invalid glob, or undefined. */
export function namespaceGlobError(glob: string): string | undefined {
  const parsed = parseNamespaceGlob(glob);
  return parsed.ok ? undefined : parsed.error;
}

const compiled = new Map<string, RegExp>();

/** Compiles a glob to an anchored matcher. Throws on an invalid glob. */
export function compileNamespaceGlob(glob: string): (name: string) => boolean {
  let regex = compiled.get(glob);
  if (!regex) {
    const parsed = parseNamespaceGlob(glob);
    if (!parsed.ok) throw new Error(parsed.error);
    regex = parsed.regex;
    compiled.set(glob, regex);
  }
  const r = regex;
  return (name) => r.test(name);
}

export function matchesNamespaceGlob(glob: string, name: string): boolean {
  return compileNamespaceGlob(glob)(name);
}

export function matchesAnyNamespaceGlob(globs: readonly string[], name: string): boolean {
  return globs.some((glob) => matchesNamespaceGlob(glob, name));
}
