/** Cuts text to at most `limit` UTF-8 bytes (the API server counts bytes), marking the cut. */
export function truncate(text: string, limit: number): string {
  if (Buffer.byteLength(text) <= limit) return text;
  let cut = text.slice(0, limit - 3);
  while (Buffer.byteLength(cut) > limit - 3) cut = cut.slice(0, -1);
  return `${cut}...`;
}
