/**
 * Every REST route of the server, in one registry ({@link buildRoutes}): the system routes (health,
 * version), the identity's (login, users, roles, groups, tokens, second factors) and the audit log's, the
 * policy domain's (policies, bindings, node groups, nodes, compliance, agent settings, catalogues, disk
 * encryption, flatpak), and last the OpenAPI document that describes them all. Every route file lives in
 * this folder; domain and identity errors the handlers throw get their HTTP status in the app's one error
 * mapping (`toHttpError`).
 */
import type { ServerContext } from "../../context.ts";
import type { Identity } from "../../auth/mod.ts";
import type { RouteSpec } from "../route.ts";
import { openApiRoute } from "../openapi.ts";
import { systemRoutes } from "./system.ts";
import { authRoutes } from "./auth.ts";
import { userRoutes } from "./users.ts";
import { roleRoutes } from "./roles.ts";
import { userGroupRoutes } from "./user_groups.ts";
import { auditLogRoutes } from "./audit_logs.ts";
import { apiTokenRoutes } from "./api_tokens.ts";
import { mfaRoutes } from "./mfa.ts";
import { webauthnRoutes } from "./webauthn.ts";
import { mfaPolicyRoutes } from "./mfa_policy.ts";
import { roleBindingListRoutes } from "./role_bindings.ts";
import { agentRepoRoutes } from "./agent_repo.ts";
import { bindingRoutes } from "./bindings.ts";
import { catalogueRoutes } from "./catalogues.ts";
import { complianceRoutes } from "./compliance.ts";
import { dashboardRoutes } from "./dashboard.ts";
import { eventRoutes } from "./events.ts";
import { flatpakRoutes } from "./flatpak.ts";
import { diskEncryptionRoutes } from "./disk_encryption.ts";
import { nodeGroupRoutes } from "./node_groups.ts";
import { nodeRoutes } from "./nodes.ts";
import { nodeBulkRoutes } from "./nodes_bulk.ts";
import { savedViewRoutes } from "./saved_views.ts";
import { policyRoutes } from "./policies.ts";
import { policyVersionRoutes } from "./policy_versions.ts";
import { polkitCatalogueRoutes } from "./polkit_catalogue.ts";
import { sessionAccessRoutes } from "./session_access.ts";
import { settingsRoutes } from "./settings.ts";
import { trendRoutes } from "./trends.ts";
import { trustAnchorRoutes } from "./trust_anchors.ts";

/** Every REST route the server mounts, in the order the OpenAPI document lists them. */
export function buildRoutes(ctx: ServerContext, identity: Identity): RouteSpec[] {
  const routes: RouteSpec[] = [...systemRoutes(ctx), ...identityRoutes(ctx, identity), ...domainRoutes(ctx)];
  routes.push(openApiRoute(() => routes, ctx.version));
  return routes;
}

/** The routes of identity and access (sessions, users, roles, groups, tokens, second factors) and the audit log. */
export function identityRoutes(ctx: ServerContext, identity: Identity): RouteSpec[] {
  const { services } = identity;
  return [
    ...authRoutes(services),
    ...userRoutes(services),
    ...roleRoutes(services),
    ...userGroupRoutes(services),
    ...auditLogRoutes(ctx),
    ...apiTokenRoutes(services),
    ...mfaRoutes(services),
    ...webauthnRoutes(services),
    ...mfaPolicyRoutes(services),
  ];
}

/** Every route of the policy domain. */
export function domainRoutes(ctx: ServerContext): RouteSpec[] {
  return [
    ...policyRoutes(ctx),
    ...policyVersionRoutes(ctx),
    ...bindingRoutes(ctx),
    ...nodeGroupRoutes(ctx),
    // Before the node routes: /nodes/matching must not be read as /nodes/:id.
    ...nodeBulkRoutes(ctx),
    ...nodeRoutes(ctx),
    ...savedViewRoutes(ctx),
    ...complianceRoutes(ctx),
    ...settingsRoutes(ctx),
    ...dashboardRoutes(ctx),
    ...trendRoutes(ctx),
    ...eventRoutes(ctx),
    ...roleBindingListRoutes(ctx),
    ...catalogueRoutes(ctx),
    ...polkitCatalogueRoutes(ctx),
    ...diskEncryptionRoutes(ctx),
    ...sessionAccessRoutes(ctx),
    ...flatpakRoutes(ctx),
    ...agentRepoRoutes(ctx),
    ...trustAnchorRoutes(ctx),
  ];
}
