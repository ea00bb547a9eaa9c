/**
 * Points Shoelace's icon libraries at the icon files embedded in the server (`web/build.ts` copies every
 * icon the sources name). Imported first, before any component renders an icon.
 */
import { registerIconLibrary } from "@shoelace-style/shoelace/dist/utilities/icon-library.js";

registerIconLibrary("default", { resolver: (name) => `/assets/icons/${name}.svg` });
registerIconLibrary("system", { resolver: (name) => `/assets/icons/system/${name}.svg` });
