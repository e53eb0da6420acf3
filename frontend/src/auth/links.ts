// The providers' web roots, from the signed-in answer of /api/auth/me or
// the login (server configuration: --coolify-url without /api/v1,
// --bitbucket-url). The dashboard links resource ids to their pages there.
import { useSyncExternalStore } from "react";
import { observable } from "../live/observable";

export interface ProviderLinks {
  coolify?: string;
  bitbucket?: string;
}

const links = observable<ProviderLinks>({});

export function setProviderLinks(l: ProviderLinks | undefined): void {
  links.set(l ?? {});
}

export function getProviderLinks(): ProviderLinks {
  return links.get();
}

export function useProviderLinks(): ProviderLinks {
  return useSyncExternalStore(links.subscribe, links.get, links.get);
}

/** JobLimits: the engine's timeouts (signed-in answer's `limits`), for "times out at" on a running step. */
export interface JobLimits {
  step_timeout_ms?: number;
  job_timeout_ms?: number;
}

const limits = observable<JobLimits>({});

export function setJobLimits(l: JobLimits | undefined): void {
  limits.set(l ?? {});
}

export function useJobLimits(): JobLimits {
  return useSyncExternalStore(limits.subscribe, limits.get, limits.get);
}
