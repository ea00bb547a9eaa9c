/**
 * What releasing a policy to a group will do there (web/src/reach_preview.ts): the other policies of the
 * type by precedence, the type's combination rule, and for key-by-key types the settings both set and who
 * wins them at the chosen priority.
 */
import assert from "node:assert/strict";
import { previewGroup } from "../../web/src/reach_preview.ts";

const NEW = { id: "b0000000-0000-4000-8000-000000000000", name: "Kiosk", value: { DisableTelemetry: true } };
const OLD = {
  id: "a0000000-0000-4000-8000-000000000000",
  name: "Lab browser",
  priority: 5,
  value: { DisableTelemetry: false, DisablePocket: true },
};

Deno.test("key by key: the higher priority wins the settings both set", () => {
  const low = previewGroup("Firefox", { ...NEW, priority: 0 }, [OLD]);
  assert.deepEqual(low.others, [{ name: "Lab browser", priority: 5 }]);
  assert.match(low.rule, /"Lab browser" wins \(priority 5 over 0\)/);
  assert.deepEqual(low.overlaps.map((o) => [o.label, o.winner, o.losers]), [
    ["Turn off telemetry", "Lab browser", ["Kiosk"]],
  ]);
  assert.equal(low.winsAll, false);
  const high = previewGroup("Firefox", { ...NEW, priority: 10 }, [OLD]);
  assert.match(high.rule, /this policy wins \(priority 10\)/);
  assert.equal(high.overlaps[0].winner, "Kiosk");
  assert.equal(high.winsAll, true);
});

Deno.test("equal priorities: the lower policy id wins, as on the agent", () => {
  const tie = previewGroup("Firefox", { ...NEW, priority: 5 }, [OLD]);
  assert.equal(tie.overlaps[0].winner, "Lab browser", "a0… sorts before b0…");
});

Deno.test("file-per-policy and union types apply side by side or together", () => {
  const polkit = previewGroup("Polkit", { ...NEW, priority: 0, value: { rules: [] } }, [{
    ...OLD,
    value: { rules: [] },
  }]);
  assert.match(polkit.rule, /writes its own file/);
  assert.deepEqual(polkit.overlaps, []);
  const session = previewGroup("SessionAccess", { ...NEW, priority: 0, value: {} }, [{ ...OLD, value: {} }]);
  assert.match(session.rule, /combined/);
  assert.match(previewGroup("Firefox", { ...NEW, priority: 0 }, []).rule, /No other policy/);
});
