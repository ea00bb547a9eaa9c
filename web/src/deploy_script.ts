/**
 * The deploy-agent wizard's script, as plain functions (no DOM) so the install test runs exactly the text
 * the wizard shows. Built from the server's own origin, its CA certificate and repository key (both
 * embedded in the script, so nothing is fetched before it is trusted), and the manifest's packages:
 *
 * 1. trust the server's internal CA (HTTPS to the repository);
 * 2. the repository and its signing key: apt deb822 with `Signed-By`, dnf/zypper with `repo_gpgcheck=1`;
 *    Alpine and Arch have no hosted repository, so their package is downloaded and its SHA-256 checked;
 * 3. install;
 * 4. optionally, enrollment: point `/etc/svc/agent.yaml` at this server, a 0600 token file,
 *    `svc-agent --token-file`, then `systemctl enable --now svc-agent`.
 *
 * @module
 */

/** Distribution families the wizard offers. */
export const FAMILIES = [
  { id: "debian", label: "Debian / Ubuntu" },
  { id: "fedora", label: "Fedora / RHEL" },
  { id: "opensuse", label: "openSUSE" },
  { id: "alpine", label: "Alpine" },
  { id: "arch", label: "Arch Linux" },
] as const;

/** A distribution family. */
export type Family = (typeof FAMILIES)[number]["id"];

/** A package of the manifest. */
export interface DeployPackage {
  path: string;
  format: string;
  arch: string;
  sha256: string;
}

/** Inputs of the script. */
export interface DeployOptions {
  /** `https://host[:port]` of the server as the browser reached it. */
  origin: string;
  family: Family;
  arch: "amd64" | "arm64";
  /** PEM of the server's internal CA (`/agent/ca.crt`). */
  caPem: string;
  /** Armored repository key (`/agent/repo-key.asc`). */
  repoKey: string;
  packages: DeployPackage[];
  /** Enrollment step: a fresh token and the policy port. */
  enrollment?: { token: string; policyPort: number };
}

/** One titled part of the script. */
export interface DeployStep {
  id: "ca" | "repository" | "install" | "enroll";
  title: string;
  script: string;
}

const RPM_ARCH = { amd64: "x86_64", arm64: "aarch64" } as const;

function heredoc(path: string, body: string, marker: string): string {
  return `cat > ${path} <<'${marker}'\n${body.trim()}\n${marker}`;
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'"'"'`)}'`;
}

function caStep(family: Family, caPem: string): string {
  const pem = (path: string) => heredoc(path, caPem, "SVC_CA");
  switch (family) {
    case "debian":
    case "alpine":
      return `install -d -m 0755 /usr/local/share/ca-certificates\n${
        pem("/usr/local/share/ca-certificates/svc-ca.crt")
      }\nupdate-ca-certificates`;
    case "fedora":
      return `${pem("/etc/pki/ca-trust/source/anchors/svc-ca.crt")}\nupdate-ca-trust`;
    case "opensuse":
      return `${pem("/etc/pki/trust/anchors/svc-ca.crt")}\nupdate-ca-certificates`;
    case "arch":
      return `${pem("/etc/ca-certificates/trust-source/anchors/svc-ca.crt")}\nupdate-ca-trust`;
  }
}

function download(options: DeployOptions, format: "apk" | "arch"): { step: string; file: string } {
  const wanted = options.packages.find((p) => p.format === format && p.arch === options.arch);
  if (!wanted) {
    return { step: `echo "this server has no ${format} package for ${options.arch}" >&2\nexit 1`, file: "" };
  }
  const name = wanted.path.slice(wanted.path.lastIndexOf("/") + 1);
  const file = `/tmp/${name}`;
  return {
    step: `curl -fsS -o ${file} ${options.origin}/agent/${wanted.path}\n` +
      `echo "${wanted.sha256}  ${file}" | sha256sum -c -`,
    file,
  };
}

/** The steps of the script for `options`. */
export function deploySteps(options: DeployOptions): DeployStep[] {
  const base = `${options.origin}/agent`;
  const steps: DeployStep[] = [{
    id: "ca",
    title: "Trust the server's certificate authority",
    script: caStep(options.family, options.caPem),
  }];
  const key = (path: string) => heredoc(path, options.repoKey, "SVC_KEY");
  switch (options.family) {
    case "debian":
      steps.push(
        {
          id: "repository",
          title: "Add the signed apt repository",
          script: `install -d -m 0755 /etc/apt/keyrings\n${key("/etc/apt/keyrings/svc-agent.asc")}\n` +
            heredoc(
              "/etc/apt/sources.list.d/svc-agent.sources",
              `Types: deb\nURIs: ${base}/deb\nSuites: stable\nComponents: main\nArchitectures: ${options.arch}\n` +
                `Signed-By: /etc/apt/keyrings/svc-agent.asc`,
              "SVC_REPO",
            ),
        },
        { id: "install", title: "Install svc-agent", script: "apt-get update\napt-get install -y svc-agent" },
      );
      break;
    case "fedora":
      steps.push(
        {
          id: "repository",
          title: "Add the signed dnf repository",
          script: `${key("/etc/pki/rpm-gpg/RPM-GPG-KEY-svc-agent")}\n` +
            heredoc(
              "/etc/yum.repos.d/svc-agent.repo",
              `[svc-agent]\nname=svc agent\nbaseurl=${base}/rpm\nenabled=1\ngpgcheck=1\nrepo_gpgcheck=1\n` +
                `gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-svc-agent`,
              "SVC_REPO",
            ),
        },
        { id: "install", title: "Install svc-agent", script: "dnf install -y svc-agent" },
      );
      break;
    case "opensuse":
      steps.push(
        {
          id: "repository",
          title: "Add the signed zypper repository",
          script: `install -d -m 0755 /etc/pki/rpm-gpg\n${key("/etc/pki/rpm-gpg/RPM-GPG-KEY-svc-agent")}\n` +
            `rpm --import /etc/pki/rpm-gpg/RPM-GPG-KEY-svc-agent\n` +
            heredoc(
              "/etc/zypp/repos.d/svc-agent.repo",
              `[svc-agent]\nname=svc agent\nbaseurl=${base}/rpm\ntype=rpm-md\nenabled=1\nautorefresh=1\n` +
                `gpgcheck=1\nrepo_gpgcheck=1\npkg_gpgcheck=1\ngpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-svc-agent`,
              "SVC_REPO",
            ),
        },
        {
          id: "install",
          title: "Install svc-agent",
          script: "zypper --non-interactive refresh svc-agent\nzypper --non-interactive install svc-agent",
        },
      );
      break;
    case "alpine": {
      const { step, file } = download(options, "apk");
      steps.push({
        id: "install",
        title: "Download, check and install svc-agent (unsigned package: its SHA-256 is checked instead)",
        script: `${step}\napk add --allow-untrusted ${file}`,
      });
      break;
    }
    case "arch": {
      const { step, file } = download(options, "arch");
      steps.push({
        id: "install",
        title: "Download, check and install svc-agent",
        script: `${step}\npacman -U --noconfirm ${file}`,
      });
      break;
    }
  }
  if (options.enrollment) {
    const url = new URL(options.origin);
    const port = url.port || "443";
    const start = options.family === "alpine"
      ? "# The package ships a systemd unit only: start /usr/bin/svc-agent with your init system."
      : "systemctl enable --now svc-agent";
    steps.push({
      id: "enroll",
      title: "Enroll with this server and start the agent",
      script: `sed -i -e 's/^  address: .*/  address: ${url.hostname}/' \\\n` +
        `  -e 's/^  enrollment_port: .*/  enrollment_port: ${port}/' \\\n` +
        `  -e 's/^  policy_port: .*/  policy_port: ${options.enrollment.policyPort}/' /etc/svc/agent.yaml\n` +
        `(umask 077 && printf '%s\\n' ${
          shellQuote(options.enrollment.token)
        } > /etc/svc/enrollment-token)\n` +
        `svc-agent --config /etc/svc/agent.yaml --token-file /etc/svc/enrollment-token\n` +
        `rm -f /etc/svc/enrollment-token\n${start}`,
    });
  }
  return steps;
}

/** The whole script, one comment per step; run it as root. */
export function deployScript(options: DeployOptions): string {
  const family = FAMILIES.find((f) => f.id === options.family)!.label;
  const arch = options.family === "debian" ? options.arch : RPM_ARCH[options.arch];
  const parts = deploySteps(options).map((s, i) => `# ${i + 1}. ${s.title}\n${s.script}`);
  return `#!/bin/sh\n# svc-agent for ${family} (${arch}) from ${options.origin}; run as root.\nset -eu\n\n` +
    parts.join("\n\n") + "\n";
}
