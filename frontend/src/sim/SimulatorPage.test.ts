import { describe, expect, it } from "vitest";
import { slot } from "../test/fakes";
import { faultBody, slotResources } from "./SimulatorPage";

describe("simulator faults aimed at one slot or job (issue 35 item 4)", () => {
  const s = slot({ name: "cedar", app_uuid: "app-c", db_uuid: "db-c", project_uuid: "proj-c", repo: { project: "SLOT", slug: "slot-cedar" } });
  it("a fault for a slot names the ids its provider calls carry", () => {
    expect(slotResources(s)).toEqual(["app-c", "db-c", "proj-c", "SLOT/slot-cedar"]);
    expect(faultBody("coolify.DeleteStorage", "403", 1, { kind: "slot", slot: s })).toEqual({
      endpoint: "coolify.DeleteStorage",
      times: 1,
      resources: ["app-c", "db-c", "proj-c", "SLOT/slot-cedar"],
      status: 403,
    });
  });
  it("a fault for a job names the job; one for anyone names neither", () => {
    expect(faultBody("coolify.ListStorages", "hang", 1, { kind: "job", job: "j-1" })).toEqual({ endpoint: "coolify.ListStorages", times: 1, job: "j-1", hang: true });
    expect(faultBody("coolify.ListStorages", "hang", 0)).toEqual({ endpoint: "coolify.ListStorages", times: 0, hang: true });
  });
});
