/**
 * Reading a raw request body (an upload, a bundle) with a byte limit: the read stops, and the refusal the
 * caller names is thrown, as soon as more than the limit has arrived, so an oversized body is never buffered
 * whole.
 */

/** The bytes of `stream`, or `tooLarge()` thrown once more than `max` bytes arrived (the stream is cancelled). */
export async function readCapped(
  stream: ReadableStream<Uint8Array>,
  max: number,
  tooLarge: () => Error,
): Promise<Uint8Array> {
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
  const all = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return all;
}
