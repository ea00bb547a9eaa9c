/**
 * Debian's real Chromium policy loader reads a hand-made `svc_` managed policy file: known keys load with their
 * values, an unknown key is flagged. Runs Chromium in a private mount namespace (tests/helpers/chromium_policy.ts);
 * where this machine cannot, the test logs "skipped: <reason>" and passes, unless SVC_REQUIRE_CHROMIUM_LOADER=1
 * (CI) makes a skip a failure.
 */
import assert from "node:assert/strict";
import { loadPoliciesWithRealChromium } from "../helpers/chromium_policy.ts";

const REQUIRED = Deno.env.get("SVC_REQUIRE_CHROMIUM_LOADER") === "1";

const POLICY_FILE = {
  HomepageLocation: "https://intranet.example/",
  BrowserSignin: 0,
  URLBlocklist: ["example.org"],
  NotARealPolicy: true,
};

async function listing(dir: string): Promise<string[] | null> {
  try {
    const names: string[] = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    return names.sort();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

Deno.test("real Chromium loads svc_test.json from the managed dir (logs 'skipped: <reason>' without chromium/unshare)", async () => {
  const root = await Deno.makeTempDir({ prefix: "svc-chromium-test-" });
  try {
    // A directory name a shell would expand or split proves the paths never reach the namespace script as code.
    const name = "managed dir 'q' $(touch svc-pwned) `touch svc-pwned`";
    const managed = `${root}/${name}`;
    await Deno.mkdir(managed);
    const file = `${managed}/svc_test.json`;
    const written = JSON.stringify(POLICY_FILE, null, 2);
    await Deno.writeTextFile(file, written);
    const etcBefore = await listing("/etc/chromium");
    const policiesBefore = await listing("/etc/chromium/policies");

    const result = await loadPoliciesWithRealChromium(managed, { timeoutMs: 20_000 });

    // The host's /etc is untouched whether the check ran or skipped.
    assert.deepEqual(await listing("/etc/chromium"), etcBefore);
    assert.deepEqual(await listing("/etc/chromium/policies"), policiesBefore);
    assert.deepEqual(await listing(root), [name]);
    assert.equal(await Deno.stat("svc-pwned").catch(() => null), null, "a path was run as shell code");
    assert.equal(await Deno.readTextFile(file), written);
    if (!result.ok) {
      if (REQUIRED) {
        throw new Error(`SVC_REQUIRE_CHROMIUM_LOADER=1 but the check skipped: ${result.skipReason}`);
      }
      console.log(`skipped: ${result.skipReason}`);
      return;
    }

    const { policies } = result;
    for (const [key, value] of Object.entries(POLICY_FILE)) {
      const record = policies[key];
      assert.ok(record, `${key} missing from chrome://policy; got ${Object.keys(policies).join(", ")}`);
      assert.deepEqual(record.value, value, key);
      assert.deepEqual(
        { level: record.level, scope: record.scope, source: record.source },
        { level: "mandatory", scope: "machine", source: "platform" },
        key,
      );
    }
    for (const key of ["HomepageLocation", "BrowserSignin", "URLBlocklist"]) {
      assert.equal(policies[key].error, undefined, `${key} should be accepted: ${policies[key].error}`);
    }
    assert.equal(policies.NotARealPolicy.error, "Unknown policy.");
    // Nothing but the bind-mounted file reached the loader (the host's own policy files are shadowed).
    assert.deepEqual(Object.keys(policies).sort(), Object.keys(POLICY_FILE).sort());
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("real Chromium helper: a missing chromium binary is a skip naming the path", async () => {
  const managed = await Deno.makeTempDir({ prefix: "svc-chromium-test-" });
  try {
    const result = await loadPoliciesWithRealChromium(managed, {
      chromiumPath: `${managed}/no-such-chromium`,
    });
    assert.deepEqual(result, {
      ok: false,
      skipReason: `${managed}/no-such-chromium not found (install it: apt-get install -y chromium)`,
    });
  } finally {
    await Deno.remove(managed, { recursive: true });
  }
});

Deno.test("real Chromium helper: a relative or missing managed dir is a caller error, not a skip", async () => {
  await assert.rejects(() => loadPoliciesWithRealChromium("etc/managed"), /must be an absolute path/);
  await assert.rejects(
    () => loadPoliciesWithRealChromium("/nonexistent/svc-managed"),
    /"\/nonexistent\/svc-managed" is not an existing directory/,
  );
});
