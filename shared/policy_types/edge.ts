/** Microsoft Edge: the managed-policy JSON Edge reads on Linux; merged by priority on the node. */
import { type EdgePolicy, EdgePolicySchema } from "../gen/svc/policy/v1/edge_pb.ts";
import { type BrowserRules, type BrowserTypeDef, defineBrowserType } from "./browser.ts";
import { EDGE_CATALOGUE } from "./browser_catalogue/edge.ts";

/** The Edge policy type. */
export const edgeType: BrowserTypeDef<EdgePolicy> = defineBrowserType<EdgePolicy>({
  wireName: "Edge",
  label: "Microsoft Edge",
  description: "Browser policies for Microsoft Edge on Linux.",
  schema: EdgePolicySchema,
  typedContentCase: "edgePolicy",
  catalogue: EDGE_CATALOGUE,
});

/** Allowed values and URL schemes of the curated Edge settings, by catalogue path. */
export const EDGE_RULES: BrowserRules = edgeType.rules;
