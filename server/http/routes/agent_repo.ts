/**
 * `GET /api/v1/agent-repo`: what the agent package repository serves, for the deploy-agent wizard — whether
 * it is enabled (the UI hides the wizard when not), the packages per format and arch, every file of the
 * manifest with its checksum, and whether the served agent version differs from the server's own.
 */
import type { ServerContext } from "../../context.ts";
import { agentRepoFor } from "../agent_repo.ts";
import type { JsonSchema } from "../json_schema.ts";
import { type RouteSpec } from "../route.ts";
import { agentRepositoryRoute as route } from "./tags.ts";

const FILE: JsonSchema = {
  type: "object",
  required: ["path", "sha256", "size"],
  properties: {
    path: { type: "string", description: "Path under /agent/" },
    sha256: { type: "string" },
    size: { type: "integer", minimum: 0 },
  },
};

const STATUS_SCHEMA: JsonSchema = {
  type: "object",
  required: [
    "enabled",
    "version",
    "server_version",
    "version_mismatch",
    "signed",
    "build_local_key",
    "arches",
    "packages",
    "files",
    "policy_port",
  ],
  properties: {
    enabled: { type: "boolean", description: "False when agent_repo.dir holds no packages (/agent/ is 404)" },
    reason: { type: "string", description: "Why the repository is disabled" },
    version: { type: ["string", "null"], description: "Agent version of the served packages" },
    server_version: { type: "string" },
    version_mismatch: { type: "boolean", description: "The served packages are not the server's version" },
    signed: { type: "boolean", description: "apt and rpm metadata are signed by repo-key.asc" },
    build_local_key: {
      type: "boolean",
      description: "Signed by a key one build generated, not a release key",
    },
    arches: { type: "array", items: { type: "string" } },
    packages: {
      type: "array",
      items: {
        type: "object",
        required: ["path", "format", "arch", "sha256", "size"],
        properties: {
          ...FILE.properties,
          format: { type: "string", enum: ["deb", "rpm", "apk", "arch"] },
          arch: { type: "string", enum: ["amd64", "arm64", "ppc64le", "unknown"] },
        },
      },
    },
    files: { type: "array", items: FILE },
    policy_port: { type: "integer", description: "The agents' policy port (the wizard's enrollment step)" },
  },
};

/** The agent repository route. */
export function agentRepoRoutes(ctx: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/agent-repo", "node:view", {
      summary: "The agent package repository served under /agent/: state, packages, files, version check",
      query: {},
      responses: { "200": { description: "Repository state", schema: STATUS_SCHEMA } },
      async handler(c) {
        return c.json({ ...await agentRepoFor(ctx).status(), policy_port: ctx.config.server.policyPort });
      },
    }),
  ];
}
