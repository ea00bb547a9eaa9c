/**
 * The route declarers of each area, one per OpenAPI tag (the tag groups an area's routes in the OpenAPI
 * document). A route file imports its area's declarer as `route` and declares each route with it:
 * `route("GET /api/v1/roles", "role:view", { summary, … })`, see {@link routesTagged}.
 */
import { routesTagged } from "../route.ts";

export const agentRepositoryRoute = routesTagged("agent repository");
export const apiTokensRoute = routesTagged("api-tokens");
export const auditRoute = routesTagged("audit");
export const authRoute = routesTagged("auth");
export const bindingsRoute = routesTagged("bindings");
export const cataloguesRoute = routesTagged("catalogues");
export const complianceRoute = routesTagged("compliance");
export const dashboardRoute = routesTagged("dashboard");
export const diskEncryptionRoute = routesTagged("disk-encryption");
export const eventsRoute = routesTagged("events");
export const flatpakRoute = routesTagged("flatpak");
export const nodeGroupsRoute = routesTagged("node-groups");
export const nodesRoute = routesTagged("nodes");
export const policiesRoute = routesTagged("policies");
export const rolesRoute = routesTagged("roles");
export const savedViewsRoute = routesTagged("saved-views");
export const settingsRoute = routesTagged("settings");
export const systemRoute = routesTagged("system");
export const userGroupsRoute = routesTagged("user-groups");
export const usersRoute = routesTagged("users");
