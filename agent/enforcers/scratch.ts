/**
 * A private scratch directory for a type's tool (compile a keyfile before it lands, read back through a profile
 * that points into the root, a user configuration that tries to override locked keys): made, handed to the
 * work, and removed whatever happens.
 *
 * @module
 */

/** Runs `work` with a fresh temporary directory named `<prefix>…`, removed afterwards. */
export async function withScratchDir<T>(prefix: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix });
  try {
    return await work(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
