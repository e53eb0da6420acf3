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

export function useProviderLinks(): ProviderLinks {
  return useSyncExternalStore(links.subscribe, links.get, links.get);
}
