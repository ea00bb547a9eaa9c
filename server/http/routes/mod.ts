/**
 * The policy domain's REST routes (policies, bindings, node groups, nodes, compliance, agent settings). Domain
 * errors they throw get their HTTP status in the app's one error mapping (`toHttpError`).
 */
import type { ServerContext } from "../../context.ts";
import { roleBindingListRoutes } from "../../auth/role_binding_routes.ts";
import type { RouteSpec } from "../route.ts";
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
import { policyRoutes } from "./policies.ts";
import { polkitCatalogueRoutes } from "./polkit_catalogue.ts";
import { sessionAccessRoutes } from "./session_access.ts";
import { settingsRoutes } from "./settings.ts";

/** Every route of the policy domain. */
export function domainRoutes(ctx: ServerContext): RouteSpec[] {
  return [
    ...policyRoutes(ctx),
    ...bindingRoutes(ctx),
    ...nodeGroupRoutes(ctx),
    ...nodeRoutes(ctx),
    ...complianceRoutes(ctx),
    ...settingsRoutes(ctx),
    ...dashboardRoutes(ctx),
    ...eventRoutes(ctx),
    ...roleBindingListRoutes(ctx),
    ...catalogueRoutes(ctx),
    ...polkitCatalogueRoutes(ctx),
    ...diskEncryptionRoutes(ctx),
    ...sessionAccessRoutes(ctx),
    ...flatpakRoutes(ctx),
    ...agentRepoRoutes(ctx),
  ];
}
