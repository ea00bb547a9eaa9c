/**
 * Byte helpers shared by the server, the agent and the packaging scripts: joining chunks into one buffer and
 * reading a stream with a size limit, so an oversized input (an upload, an inflated archive entry) is refused
 * as soon as it passes the limit instead of being buffered whole.
 */

/** One buffer holding `chunks` back to back. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let total = 0;
  for (const chunk of chunks) total += chunk.byteLength;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/** The bytes of `stream`, or `tooLarge()` thrown once more than `max` bytes arrived (the stream is cancelled). */
export async function readCapped(
  stream: ReadableStream<Uint8Array>,
  max: number,
  tooLarge: () => Error,
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  return concatBytes(chunks);
}
