// latinWords finds English left in Korean text: the Korean tests
// (i18n/korean.test.tsx, i18n/reasons.test.ts) share it.

/** Words that stay Latin in Korean text: product and protocol names. */
export const ALLOWED = new Set(["Slotkeeper", "Coolify", "Bitbucket", "Git", "HTTP", "API", "ID", "SSO", "CI", "Authorization", "Bearer"]);

/** latinWords lists the English words left in s once the given ids and names are taken out. */
export function latinWords(s: string, ids: readonly string[] = []): string[] {
  let rest = s;
  for (const id of [...ids].sort((a, b) => b.length - a.length)) if (id) rest = rest.split(id).join(" ");
  return (rest.match(/[A-Za-z][A-Za-z_.-]*/g) ?? []).filter((w) => !ALLOWED.has(w));
}
