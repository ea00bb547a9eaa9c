/**
 * The facts behind the Certificates type's browser design, checked with Debian's real firefox-esr and chromium
 * against an HTTPS server whose certificate a test CA issued:
 *
 * - with the files the agent wrote (Firefox's policies.json listing the anchor file in Certificates.Install,
 *   Chromium's managed policy file carrying CACertificates), both browsers trust the server;
 * - without them, neither does, not even with the CA in the system bundle (Firefox keeps its own roots) or in
 *   the system NSS database /etc/pki/nssdb (Debian's Chromium does not read it; certutil from libnss3-tools).
 *
 * The browsers run as root in a private mount namespace (`unshare -m`) over an overlay of /etc, so the host's
 * /etc is never touched. Skipped, saying why, where this machine lacks a browser, certutil, or namespaces.
 */
import assert from "node:assert/strict";
import { engineFor, nodeTest, type TempNode, tempNode } from "./helpers.ts";
import { issueServerCertificate, makeCertificate } from "../helpers/test_ca.ts";

const have = async (cmd: string) =>
  (await new Deno.Command("sh", { args: ["-c", `command -v ${cmd}`], stdout: "null" }).output()).success;
const missing = [];
for (const cmd of ["firefox-esr", "chromium", "certutil", "unshare", "update-ca-certificates"]) {
  if (!(await have(cmd))) missing.push(cmd);
}
if (Deno.uid() !== 0) missing.push("root (for mounts)");
if (missing.length) console.warn(`real-browser certificate tests skipped: missing ${missing.join(", ")}`);

/**
 * Runs inside the namespace. Positional parameters: overlay upper and work directories, the node root (its
 * policy and anchor files are copied into place when $4 is "with-policies"), what to add ($5: "bundle" puts the
 * CA into the system bundle, "nssdb" into /etc/pki/nssdb), the CA file, Chromium's and Firefox's URLs, a scratch
 * directory, and the file that appears once Firefox's connection was accepted or refused (Firefox keeps running
 * on an error page, so it is stopped then).
 */
const SCRIPT = `
set -e
upper=$1; work=$2; root=$3; policies=$4; extra=$5; ca=$6; chromium_url=$7; firefox_url=$8; scratch=$9; decided=\${10}
mount -t overlay svc-etc -o "lowerdir=/etc,upperdir=$upper,workdir=$work" /etc
mount -t tmpfs svc-anchors /usr/local/share/ca-certificates
if [ "$policies" = with-policies ]; then
  mkdir -p /etc/firefox/policies /etc/chromium/policies/managed
  cp "$root/etc/firefox/policies/policies.json" /etc/firefox/policies/
  cp "$root/etc/chromium/policies/managed/svc_policies.json" /etc/chromium/policies/managed/
  cp "$root"/usr/local/share/ca-certificates/svc-policy-*.crt /usr/local/share/ca-certificates/
else
  rm -rf /etc/firefox/policies /etc/chromium/policies
fi
case "$extra" in
  bundle) cat "$ca" >> /etc/ssl/certs/ca-certificates.crt ;;
  nssdb) mkdir -p /etc/pki/nssdb
         certutil -N -d sql:/etc/pki/nssdb --empty-password
         certutil -A -d sql:/etc/pki/nssdb -n svc-test-ca -t C,, -i "$ca" ;;
esac
mkdir -p "$scratch/home" "$scratch/profile"
echo "--- chromium"
HOME="$scratch/home" timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \\
  --user-data-dir="$scratch/chromium" --dump-dom "$chromium_url" 2>/dev/null || true
echo "--- firefox"
HOME="$scratch/home" firefox-esr --headless --no-remote --profile "$scratch/profile" \\
  --screenshot "$scratch/shot.png" "$firefox_url" >/dev/null 2>&1 &
i=0
while [ ! -e "$decided" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
`;

const CA = await makeCertificate({ key: "ec:P-256", subject: "/CN=svc browser test CA" });

interface Outcome {
  chromium: boolean;
  firefox: boolean;
}

/**
 * A TLS server for one browser: `trusted` once it asked for a page (so the handshake succeeded), `refused` once a
 * handshake failed (the browser did not trust the certificate); `decided` resolves at the first of the two.
 */
function tlsServer(cert: { pem: string; keyPem: string }, onDecided: () => void) {
  const listener = Deno.listenTls({ hostname: "127.0.0.1", port: 0, cert: cert.pem, key: cert.keyPem });
  const state = { trusted: false, refused: false };
  const decide = () => onDecided();
  (async () => {
    for await (const conn of listener) {
      (async () => {
        try {
          await conn.handshake();
        } catch {
          state.refused = true;
          decide();
          return conn.close();
        }
        try {
          const buf = new Uint8Array(16384);
          let text = "";
          while (!text.includes("\r\n\r\n")) {
            const n = await conn.read(buf);
            if (n === null) break;
            text += new TextDecoder().decode(buf.subarray(0, n));
          }
          if (text.startsWith("GET ")) state.trusted = true;
          const body = "<html><body>svc-trusted</body></html>";
          await conn.write(new TextEncoder().encode(
            `HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
          ));
          if (state.trusted) decide();
        } catch {
          // the browser went away
        } finally {
          try {
            conn.close();
          } catch {
            // already closed
          }
        }
      })();
    }
  })().catch(() => {});
  return {
    url: `https://localhost:${(listener.addr as Deno.NetAddr).port}/`,
    state,
    close: () => listener.close(),
  };
}

/** Loads a test server in each browser under the namespace; which of them got through TLS. */
async function browse(
  node: TempNode,
  policies: boolean,
  extra: "none" | "bundle" | "nssdb",
): Promise<Outcome> {
  const leaf = await issueServerCertificate(CA, ["localhost", "127.0.0.1"]);
  const scratch = await Deno.makeTempDir({ prefix: "svc-browsers-" });
  const decided = `${scratch}/decided`;
  const chromium = tlsServer(leaf, () => {});
  const firefox = tlsServer(leaf, () => void Deno.writeTextFile(decided, "").catch(() => {}));
  try {
    for (const dir of ["upper", "work", "run"]) await Deno.mkdir(`${scratch}/${dir}`);
    await Deno.writeTextFile(`${scratch}/ca.pem`, CA.pem);
    const out = await new Deno.Command("unshare", {
      // A PID namespace whose init is the script: every browser process ends with it.
      args: [
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "sh",
        "-c",
        SCRIPT,
        "sh",
        `${scratch}/upper`,
        `${scratch}/work`,
        node.root,
        policies ? "with-policies" : "none",
        extra,
        `${scratch}/ca.pem`,
        chromium.url,
        firefox.url,
        `${scratch}/run`,
        decided,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.ok(out.success, `${stdout}\n${new TextDecoder().decode(out.stderr)}`);
    const chromiumPart = stdout.slice(stdout.indexOf("--- chromium"), stdout.indexOf("--- firefox"));
    assert.equal(chromiumPart.includes("svc-trusted"), chromium.state.trusted);
    assert.ok(
      firefox.state.trusted || firefox.state.refused,
      "Firefox neither connected nor refused in time",
    );
    return { chromium: chromium.state.trusted, firefox: firefox.state.trusted };
  } finally {
    chromium.close();
    firefox.close();
    await Deno.remove(scratch, { recursive: true });
  }
}

nodeTest(
  "certificates: real Firefox and Chromium trust the CA through svc's policy files, and only through them",
  { make: () => tempNode({ firefox: true, original: null }), ignore: missing.length > 0 },
  async (node) => {
    const root = node.root;
    // The node's store: Debian's layout with its real tool (no other CAs needed for this check).
    await Deno.mkdir(`${root}/usr/share/ca-certificates`, { recursive: true });
    await Deno.mkdir(`${root}/usr/local/share/ca-certificates`, { recursive: true });
    await Deno.mkdir(`${root}/etc/ssl/certs`, { recursive: true });
    await Deno.writeTextFile(`${root}/etc/ca-certificates.conf`, "");
    await Deno.mkdir(`${root}/usr/lib/chromium`, { recursive: true });
    const { engine, reports } = await engineFor(node);
    const policy = {
      id: "trust",
      name: "trust",
      type: "Certificates",
      version: 1,
      priority: 0,
      content: JSON.stringify({ certificates: [{ name: "browser-test", pem: CA.pem }] }),
    };
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();
    assert.equal(reports.get("trust")!.status, "COMPLIANT", JSON.stringify(reports.get("trust")));

    assert.deepEqual(
      await browse(node, false, "none"),
      { chromium: false, firefox: false },
      "no trust by default",
    );
    assert.deepEqual(await browse(node, true, "none"), { chromium: true, firefox: true }, "svc's files");
    assert.deepEqual(
      await browse(node, false, "bundle"),
      { chromium: false, firefox: false },
      "the system bundle alone reaches neither browser",
    );
    assert.equal(
      (await browse(node, false, "nssdb")).chromium,
      false,
      "Debian's Chromium ignores /etc/pki/nssdb",
    );
  },
);
